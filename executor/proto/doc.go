// Package proto is the executor protocol bma.executor.v1.1 itself: one
// JSON-RPC 2.0 object per WebSocket text message, in both directions,
// between an executor and the harness.
//
// It holds the frame type and its decoders (with size and shape limits),
// the frame encoders, the protocol's error codes, close codes and
// subprotocol names, the method names, typed params and results for
// every method, and the rule for where a session's file views are
// mounted on an executor.
//
// It is the one declaration of the protocol for both sides: the harness
// (package executor and its helpers) and the executor SDK
// (client/executor) import it. So that the SDK can do that without
// linking any server code, it imports only the standard library: mapping
// Baton's errors to these codes and running a connection over a
// WebSocket are the harness's business (package executor/peer), and the
// SDK runs its own connection. Where the two sides deliberately differ,
// both rules live here side by side: Decode is the harness's strict
// decoder, DecodeLoose the executor's tolerant one.
//
// The package knows nothing about sessions, leases or tokens.
package proto
