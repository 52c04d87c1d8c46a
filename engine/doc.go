// Package engine runs Baton's sessions: the lifecycle checks of opening,
// joining and closing a session, the revocation cascade, and one actor per
// open session that owns its turn gate, its paused turn and its drivers.
// A turn belongs to the session, not to the request that started it: it
// runs on a goroutine the engine owns, and the request only watches.
//
// The engine orchestrates through the root package's interfaces only; it
// never imports an adapter. cmd/baton hands it a store, a hub, providers,
// a registry and an authenticator.
//
// # Files
//
// Session lifecycle:
//
//	engine.go        Options, New, Close; forget (a closed session's runtime); the cached session row
//	session.go       Open, Join, CloseSession, RevokeClientKey: the lifecycle checks and the revocation cascade
//	validate.go      the checks of a client's declared tools at open and join
//	rpc.go           the session methods of the client API: drivers, sendMessage, cancelTurn, tool updates, subscribe feeds
//	params.go        JSON-RPC params decoded as BAE decodes them
//
// The actor and the turn gate:
//
//	actor.go         one actor per open session: drivers, the running turn, the parked turn and its abandonment timer, the queue
//
// The turn loop:
//
//	turn.go          turnCtx (emit, emitBehind, hold), runTurn, the model-call iterations, dispatchAll
//	providers.go     the provider chain of one model call: timeout, retries with backoff, failover, provider events
//
// History and transcript:
//
//	history.go       tool_use and tool_result helpers, the transcript rebuilt from the log, the cached conversation
//	merge.go         a paused turn's continuation: strict merge, voluntary input, abandonment
//	blocks.go        content block arrays: the fast decoder (fuzzed against a reference) and rewrites
//
// Tool routing and its dispatchers:
//
//	route.go         what a turn advertises, the routing precedence and tables, classify, dispatch
//	sandbox.go       remote sandboxes (start, stop, exec, local reports) and dispatchSandbox
//	mcp.go           a profile's MCP servers and dispatchMCP
//	clientcall.go    dispatchRegisteredCall: one call to a registered client
//	executor.go      dispatchExecutor and its throttled progress; executors' session events
//	subagent.go      remote subagents, dispatchSubagent and the status tool
//
// Registered clients:
//
//	client.go        baton.ClientService: registration, lifetimes and the ttl sweep, calls streams, results
//
// Brain sessions (an executor runs the agent loop):
//
//	brain.go         a brain session's runtime and how a sendMessage is admitted on it
//	brain_turn.go    the life of a brain turn: start, join, pause, abandonment, end, cancel
//	brain_event.go   the executor's agent events, deltas and interactions
//	brain_recover.go a brain session rebuilt from its log after a restart
//	gateway.go       what a brain turn asks of the server: model calls and session tools
//
// Time:
//
//	clock.go         after and withTimeout on the engine's baton.Clock (Options.Clock)
//
// # Lock order
//
// Each mutex guards its own struct. Where one is taken while another is
// held, the outer one comes first in this order:
//
//	brainSession.mu → Engine.mu, actor.mu   (loadLocked reads the session row: sessionRow takes each in turn)
//	subagents.mu    → actor.mu              (add checks the session is open and its sandbox)
//	Engine.cmu      → regClient.mu          (release checks that a client's runtime is idle and ends it)
//	progress.mu     → turnCtx.mu            (report queues an executor call's progress event)
//
// Engine.mu, Engine.ccMu, brains.mu, actor.mu, regClient.mu, turnCtx.mu
// and feeds.mu are leaves: no other engine mutex is taken while one of
// them is held. No code path holds two actors' or two brain sessions'
// locks at once. Outside the engine, turnCtx.mu is held while the store
// commits, feeds.mu across the hub's Subscribe and End, and
// brainSession.mu while the executor hub restores an interaction; none of
// them calls back into the engine while it holds a lock of its own. Timers
// are armed under actor.mu and brainSession.mu; their functions run
// without any lock held.
package engine
