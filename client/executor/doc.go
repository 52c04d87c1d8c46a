// Package executor is the Go SDK for executors: processes on some machine
// that connect out to a Baton (or BAE) harness over WebSocket and offer it
// tools, a remote shell or a whole agent brain, with the JSON-RPC 2.0
// protocol bma.executor.v1.1.
//
// The package does not import Baton's server packages. Of Baton it
// imports only executor/proto, the protocol's frames and types, which is
// shared with the harness and imports only the standard library.
//
// # Connecting
//
// An Executor is built from a Config naming the harness (BaseURL), the
// long-lived credential (bae_exc_…) and its Scope: an environment (a pool
// of tool executors) or a machine (a shell and/or a brain). Open exchanges
// the credential for a short-lived executor token (POST
// /v1/environments/{id}/token or /v1/machines/{id}/token), dials
// GET /v1/executors/connect with that token and subprotocol
// bma.executor.v1.1, and sends executor.register with the capabilities.
//
//	e, err := executor.New(executor.Config{
//		BaseURL:    "https://baton.example",
//		Credential: os.Getenv("BATON_EXECUTOR_CREDENTIAL"),
//		Scope:      executor.Environment("env_…"),
//		Tools: []executor.Tool{{
//			Def: executor.ToolDef{Name: "lookup", Description: "Look a word up"},
//			Handle: func(ctx context.Context, c executor.Call) (executor.Result, error) {
//				return executor.TextResult("found"), nil
//			},
//		}},
//	})
//	if err != nil {
//		return err
//	}
//	if err := e.Open(ctx); err != nil {
//		return err
//	}
//	defer e.Close(context.WithoutCancel(ctx))
//
// From then on the executor runs by itself: it heartbeats at the interval
// the harness returned (honouring drain), fetches a fresh token before the
// current one expires and hands it over with executor.token.refresh, and
// reconnects with capped, jittered exponential backoff when the connection
// drops or closes with 1001, 4001 or 4008. It stops for good, closing Done
// and setting Err, when the harness sends executor.close, closes with 4002
// or 4003, refuses the registration (-32010, -32012) or the credential.
//
// # Exactly once
//
// tool.result, session.ended, session.event (an agent's, and a tool's
// Call.Event), interaction.request and interaction.cancel are held until
// the harness answers them. After a
// reconnect executor.register carries resume {executor_id,
// active_sessions:[{session_id, epoch, acked_sequence}]} and every held
// request is re-sent, in its original order and with its original JSON-RPC
// id, before anything new. Agent events carry per-session sequence
// numbers; the harness treats a sequence at or below acked_sequence as a
// duplicate. Incoming tool calls are idempotent by tool_call_id, turns by
// turn_id and inputs by input_id.
//
// A resume may move a session to a new binding epoch; Baton's register
// result lists the resumed sessions with theirs (sessions). The executor
// adopts it: an agent session's held events and session.ended are
// re-encoded with it (same ids) before they are re-sent, since the harness
// refuses an older epoch with -32013, and from then on its events,
// Turn.Epoch and RefreshToolsToken use it. The turn's tools_mcp_token is
// bound to the old epoch and refused once it is superseded: a brain that
// uses it calls RefreshToolsToken for one of the new epoch.
//
// # Serving
//
// Tools run on a goroutine per call, acknowledged at once; tool.cancel,
// session.stop, the call's timeout and Close cancel the handler's context,
// Call.Progress sends tool.progress and Call.Event a durable session
// event (session.event {type, data}). A tool.call for a tool nobody
// serves is refused with -32012 and data.capability "tool:<name>".
// tool.call "process.exec" goes to Config.Process; Shell runs it with sh -c
// in a process group of its own, capped output and SIGTERM/SIGKILL on
// cancellation.
//
// session.assign is accepted up to Capabilities.Process.MaxSessions (then
// -32009) and answered with session.ready; session.stop cancels the
// session's calls and, once they have returned, sends session.ended.
//
// An Agent runs turns: turn.start opens the session (Agent.Open) on first
// use and runs Agent.Run with a *Turn, through which the agent reads
// turn.input (Inputs, InputReady), emits durable events (Emit) and live
// previews (Delta), asks for approvals (RequestInteraction), calls custom
// tools (CustomTool) and refreshes its model and tools tokens. turn.cancel
// cancels the turn's context; session.close cancels it, waits for its
// events to be acknowledged, calls Agent.Close and sends session.ended.
//
// # Shutting down
//
// Close cancels the tool calls still running and sends each an is_error
// result ("the executor stopped", "… (drain timed out)" after Drain),
// waiting for their acknowledgement, before executor.close; the harness
// ends this executor's sessions on executor.close. To stop without
// losing any, call Drain first: it refuses new tool calls, sessions and
// agent sessions with -32009 data.reason "draining" (as executor.drain
// from the harness refuses new sessions) and returns once the running
// calls and turns have finished and every held request was acknowledged.
//
//	dctx, cancel := context.WithTimeout(ctx, time.Minute)
//	err := e.Drain(dctx) // context.DeadlineExceeded: work still running
//	cancel()
//	e.Close(ctx)
//
// # Files
//
// With Config.Files a machine-scoped executor serves fs.mount and
// fs.unmount: each view of a session's files is mounted at its path
// (below FileMounts.Root) as a FUSE file system reading from and writing
// to the view's service URL, or, where FUSE cannot mount, kept as a
// synced directory (a copy made at mount whose local changes are uploaded
// periodically, at fs.unmount with flush and at Close). fs.mount is
// idempotent by (session_id, view): a new token is swapped in without a
// remount; a changed path or read-only flag remounts. Tokens are kept in
// memory only.
//
// # Errors
//
// *RPCError is a JSON-RPC error object (the Code constants list the
// protocol's codes); *HTTPError a failed token exchange or upgrade;
// *CloseError and *RegisterError say why the harness stopped the executor;
// ErrDisconnected and ErrClosed report calls that lost their connection or
// came after Close.
package executor
