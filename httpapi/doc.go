// Package httpapi serves Baton's client port: BAE's REST routes under
// /api/v1 (open, join, participants, events, close), /healthz and
// /api/v1/meta, and Baton's session files (/api/v1/sessions/{id}/files/…,
// …/artifacts/{id}), artifact uploads and the executor file service
// (/v1/fs/{session_id}/{view}/…, authorized by view tokens). Each resource has its own file; later routes (/rpc, /v1)
// register themselves in routes the same way.
//
// Checks run in BAE's order. Open and join read and decode the body first
// (415, 413, 400, 422, as BAE's framework does), then authenticate the
// client key (401), then hand over to the session service, whose coded
// errors go through httpx's one code → status table. Session-key routes
// parse only their query string before authenticating.
//
// In front of every route sit the client port's guards, outermost first:
// the per-credential rate limit (ratelimit.go), the in-flight byte budget
// (inflight.go), the minimum Client-Version (version.go) and idempotency
// receipts (idempotency.go, with the ReceiptSweeper of sweep.go deleting
// old ones). A guard's refusal takes the shape of the API it refuses: the
// /v1 error envelope under /v1, an RFC 7807 problem elsewhere (guard.go).
package httpapi
