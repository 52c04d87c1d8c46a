package baton

// The catalogue of event types Baton writes to a session's log (the event
// types of docs/api.md and docs/executors.md). Every package that writes or
// reads an event by type uses these names; no other file declares one.
// Events an executor reports are the exception: an agent's events keep
// their type when it is one of the Agent* types below or any other
// "agent." type (anything else is stored under EventAgentEvent), and a
// tool or shell executor's events are stored under EventExecutorEvent.

// The session's life (BAE's client API).
const (
	EventSessionOpen    = "session.open"
	EventSessionJoin    = "session.join"
	EventSessionClose   = "session.close"
	EventSessionError   = "session.error"
	EventDriverRegister = "session.driver.register"
	EventTurnCancel     = "session.turn.cancel" // Baton extension
)

// The turn loop: messages, model calls and tool calls (BAE's client API).
const (
	EventClientMessage = "client.message.send"
	EventServerMessage = "server.message.send"
	EventProviderReq   = "provider.request"
	EventProviderResp  = "provider.response"
	EventToolCall      = "tool.call"
	EventToolResult    = "tool.result"
	EventMCPRequest    = "mcp.request"
	EventMCPResponse   = "mcp.response"
)

// Sandboxes (BAE's client API, remote and local sandboxes).
const (
	EventSandboxAvail   = "session.sandbox.available"
	EventSandboxStart   = "session.sandbox.start"
	EventSandboxRunning = "session.sandbox.running"
	EventSandboxStop    = "session.sandbox.stop"
	EventSandboxStopped = "session.sandbox.stopped"
	EventSandboxError   = "session.sandbox.error"
	EventSandboxReq     = "sandbox.request"
	EventSandboxResp    = "sandbox.response"
)

// Subagents (BAE's client API, subagents).
const (
	EventSubagentStart     = "session.subagent.start"
	EventSubagentRunning   = "session.subagent.running"
	EventSubagentCompleted = "session.subagent.completed"
	EventSubagentFailed    = "session.subagent.failed"
	EventSubagentCancelled = "session.subagent.cancelled"
)

// Registered session clients (docs/api.md, registered session clients).
const (
	EventClientRegister   = "session.client.register"
	EventClientTools      = "session.client.tools"
	EventClientExpire     = "session.client.expire"
	EventClientToolCall   = "client.tool.call"
	EventClientToolResult = "client.tool.result"
)

// Executor tool calls (bma.executor.v1.1, "How executors serve sessions");
// the outcome is also logged as the usual tool.result with dispatch
// "executor".
const (
	EventExecutorToolCall     = "executor.tool.call"
	EventExecutorToolProgress = "executor.tool.progress"
	EventExecutorToolResult   = "executor.tool.result"
)

// EventExecutorEvent is the type a tool or shell executor's durable
// session.event is stored under, whatever its own type (kept in the
// payload), so that an executor cannot write the server's event types.
const EventExecutorEvent = "executor.event"

// Interactions of brain sessions (bma.executor.v1.1).
const (
	EventInteractionRequest  = "interaction.request"
	EventInteractionResponse = "interaction.response"
	EventInteractionCancel   = "interaction.cancel"
)

// The AgentEvent types of brain sessions (bma.executor.v1.1) that are
// stored under their own type. The engine acts on AgentMessage,
// AgentCustomToolUse, AgentError and AgentStatusIdle; the rest are only
// stored.
const (
	AgentMessage       = "agent.message"
	AgentThinking      = "agent.thinking"
	AgentToolUse       = "agent.tool_use"
	AgentToolResult    = "agent.tool_result"
	AgentCustomToolUse = "agent.custom_tool_use"
	AgentError         = "agent.error"
	AgentStatusRunning = "session.status_running"
	AgentStatusIdle    = "session.status_idle"
)

// EventAgentEvent is the type an agent event is stored under when its own
// type is neither an Agent* type nor another "agent." type (kept in the
// payload), so that an executor cannot write the server's event types.
const EventAgentEvent = "agent.event"
