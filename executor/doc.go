// Package executor is the harness side of the executor protocol
// bma.executor.v1.1 (bma.executor.v1.1, bma.executor.v1.1): executors — processes
// on other machines offering tools, a shell or a brain — connect out to
// Baton over WebSocket, and the Hub keeps them.
//
// Hub serves GET /v1/executors/connect (mount it on the client port). It
// checks the executor token (baton.ExecutorTokens) and the subprotocol
// before upgrading, requires executor.register as the first frame (any
// other first message — another method, a response, a binary or malformed
// message — is answered with an error and closed with 4002), and
// then keeps each connection's lease (heartbeats; two missed close it with
// 4008) and token deadline (4001, moved by executor.token.refresh). The
// registry of executors by environment, machine and id, with their
// capabilities, is queried with Executors and Executor.
//
// Assign binds a session to an executor (session.assign, then
// session.ready) and returns a Binding, through which the engine calls
// tools (tool.call acknowledged, outcome by tool.result, first result
// wins), cancels them, stops the session and mounts files. A bound
// session's durable session.event goes to Hooks.OnEvent or, for an
// Assignment naming a Baton session (Events), to the attached sink's
// HandSink, which commits it before it is acknowledged. Every
// (re)binding has a new epoch; messages of an older owner are refused
// with -32013. The register result of a resume lists the resumed
// sessions, hand and agent ones, with their new epochs. When a connection drops or its lease expires the
// executor's sessions are detached: an executor that registers again
// with resume within the resume window gets them back under new epochs
// and its unanswered tool calls are re-sent; otherwise they end and their
// pending calls fail with ErrResumeWindow. An executor that sends
// executor.close is gone for good: its sessions end at once
// (ErrExecutorClosed) and their next calls bind elsewhere. The sessions a resume names
// that the hub cannot bind again (a restarted hub never saw them) are
// stopped with session.stop reason "unknown_session", agent sessions
// excepted.
//
// The Hub is also the engine's baton.Brains (agent.go): StartTurn opens a
// brain session on a machine's least loaded agent executor with its first
// turn.start (no session.assign) and keeps it there; turn.input,
// turn.cancel and session.close follow it. Agent session.event messages
// are taken in sequence order and deduplicated by event_id (a gap is
// -32013 with data.expected_sequence) and handed to the attached
// baton.AgentSink before they are acknowledged; session.event_delta goes
// to the sink live; an agent event of an epoch before the session's
// current one is -32013. interaction.request opens a platform interaction
// (idempotent by interaction_id; appr_ ids are adopted), answered through
// RespondInteraction, expired at expires_at or withdrawn by
// interaction.cancel. interaction.response, agent.custom_tool_result and
// session.close are held and re-sent on every new connection until the
// executor answers them. An agent session whose executor does not resume
// it within the resume window is reported lost.
//
// Close drains (executor.drain), sends executor.close and closes every
// connection with 1001. RevokeCredential closes a credential's
// connections with 4001 (with Options.Restartable, Close sends no
// executor.close, so executors reconnect after a restart). The JSON-RPC
// framing lives in package executor/proto.
//
// Two adapters serve sessions through a Hub: Hands (baton.ExecutorHands)
// runs sessions' tool calls on environment executors, binding a session
// once per environment and reusing the binding; Shell
// (baton.SandboxDriver) runs remote sandboxes of images
// "executor:<machine_id>" on machine executors with a shell, commands as
// tool.call "process.exec".
//
// With Options.Files the hub mounts a Baton session's files (fs.mount) on
// the machine executors that declared capabilities.fs.fuse and serve the
// session — a remote sandbox started with Shell.StartFor, a brain after
// its first turn — again after every resume and before the view tokens
// expire, and unmounts them with flush before session.stop or
// session.close (mount.go). It is also the file service's
// filearea.Epochs: tokens of an epoch no binding has any more are refused.
package executor
