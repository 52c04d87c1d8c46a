// Package executor is the harness side of the executor protocol
// bma.executor.v1.1 (seed 003, spec/executor.md): executors — processes
// on other machines offering tools, a shell or a brain — connect out to
// Baton over WebSocket, and the Hub keeps them.
//
// Hub serves GET /v1/executors/connect (mount it on the client port). It
// checks the executor token (baton.ExecutorTokens) and the subprotocol
// before upgrading, requires executor.register as the first frame, and
// then keeps each connection's lease (heartbeats; two missed close it with
// 4008) and token deadline (4001, moved by executor.token.refresh). The
// registry of executors by environment, machine and id, with their
// capabilities, is queried with Executors and Executor.
//
// Assign binds a session to an executor (session.assign, then
// session.ready) and returns a Binding, through which the engine calls
// tools (tool.call acknowledged, outcome by tool.result, first result
// wins), cancels them, stops the session and mounts files. Every
// (re)binding has a new epoch; messages of an older owner are refused
// with -32013. When a connection drops or its lease expires the
// executor's sessions are detached: an executor that registers again
// with resume within the resume window gets them back under new epochs
// and its unanswered tool calls are re-sent; otherwise they end and their
// pending calls fail with ErrResumeWindow.
//
// Close drains (executor.drain), sends executor.close and closes every
// connection with 1001. RevokeCredential closes a credential's
// connections with 4001. The JSON-RPC framing lives in package
// executor/proto.
package executor
