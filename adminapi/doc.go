// Package adminapi serves Baton's admin port: BAE's /admin/v1 REST API for
// profiles, client keys, sessions and their events, the provider and MCP
// registries, the redacted configuration and sandbox image status
// (BAE's admin API), plus Baton's own routes: executor environments,
// machines and their credentials, and GET /admin/v1/nodes, the nodes of
// a cluster sharing one PostgreSQL database (docs/cluster.md). In a
// cluster the session list also names each session's owner node.
//
// Every /admin/v1 route authenticates the admin bearer token before it
// reads anything else, unless authentication is disabled (Options.Auth
// nil). The port must listen on a loopback address; Open refuses any other.
package adminapi
