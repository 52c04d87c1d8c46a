// Package proto is the wire of the executor protocol bma.executor.v1.1
// (bma.executor.v1.1, bma.executor.v1.1): one JSON-RPC 2.0 object per WebSocket text
// message, in both directions, between an executor and the harness.
//
// It holds the frame type and its decoder (with size and shape limits),
// the frame encoders, the protocol's error codes, close codes and
// subprotocol names, the method names, and typed params and results for
// every method. Peer runs one bidirectional JSON-RPC connection over a
// github.com/coder/websocket connection: a reader goroutine, outgoing
// requests correlated by id, incoming requests dispatched to a Handler.
//
// The package knows nothing about sessions, leases or tokens; the harness
// side (package executor) and executor SDKs build on it.
package proto
