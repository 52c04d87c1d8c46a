// Package config loads bae-config.toml, the file that names Baton's model
// providers, MCP servers and telemetry settings (BAE's admin API).
//
// The file is read once at startup. Load and Parse validate every rule of
// BAE's admin API and report the first problem as an *Error carrying the
// line and column of the offending key when it can be located. Provider auth
// tokens and MCP templates are kept raw (their ${VAR} references are resolved
// just before use); telemetry headers are resolved at load. Redacted gives
// the snapshot GET /admin/v1/config returns, with every secret replaced.
//
// Locate and LocateKeyParts give the line and column of any key of a
// decoded TOML document, for callers that validate other TOML files the
// same way.
package config
