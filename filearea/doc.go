// Package filearea is the domain of session files and artifacts
// (bma.executor.v1.1, "Files and artifacts"): the rules a file path must
// follow, the records the store keeps, the limits, the grants of the view
// tokens that let an executor reach a session's files.
//
// # Paths
//
// A session's files are keyed by a normalized relative path: components
// separated by "/", no leading "/", no empty, "." or ".." components, no
// NUL, control characters or backslashes, valid UTF-8, at most
// MaxNameBytes per component and MaxPathBytes in all. Clean normalizes
// what it can (repeated and trailing slashes, "." components) and refuses
// the rest with ECodeBadRequest. Directories are implicit: a directory
// exists while some file lies below it, and a path cannot be both a file
// and a directory.
//
// # Views
//
// An executor sees a session's files through views: a name (the {view} of
// <origin>/v1/fs/{session_id}/{view}), the place it mounts it, the part of
// the file area it shows and whether it is read-only. Each view comes with
// a token naming the session, the view, its root, the binding epoch, the
// read-only flag and an expiry, signed by the installation (package auth);
// the file service trusts nothing else. The executor side — minting views
// and sending them with fs.mount for a binding's current epoch — is
// package executor's (its Minter). Epochs, or an EpochSet when a session
// may be bound to several executors at once, tells the file service which
// epochs are current.
//
// The package imports only the standard library and the root package, so
// the store and the token issuer (package auth) that use its rules link no
// executor protocol or WebSocket code.
package filearea
