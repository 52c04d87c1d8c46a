package proto

// Subprotocols, in order of preference. The register frame's protocol must
// equal the one negotiated.
const (
	SubprotocolV11 = "bma.executor.v1.1"
	SubprotocolV1  = "bma.executor.v1"
)

// Subprotocols lists the subprotocols a harness accepts, preferred first.
func Subprotocols() []string { return []string{SubprotocolV11, SubprotocolV1} }

// Methods, executor → harness.
const (
	MethodRegister           = "executor.register"
	MethodHeartbeat          = "executor.heartbeat"
	MethodTokenRefresh       = "executor.token.refresh"
	MethodCapabilitiesUpdate = "executor.capabilities.update" // notification
	MethodSessionReady       = "session.ready"
	MethodSessionEvent       = "session.event"
	MethodSessionStatus      = "session.status" // notification
	MethodSessionEnded       = "session.ended"
	MethodToolResult         = "tool.result"
	MethodToolProgress       = "tool.progress" // notification
	MethodInteractionRequest = "interaction.request"
	MethodInteractionCancel  = "interaction.cancel"
	MethodModelTokenRefresh  = "model_token.refresh"
	MethodToolsTokenRefresh  = "tools_token.refresh"
	MethodEventDelta         = "session.event_delta" // notification
)

// Methods, harness → executor.
const (
	MethodDrain               = "executor.drain"
	MethodClose               = "executor.close" // notification, either side
	MethodSessionAssign       = "session.assign"
	MethodSessionStop         = "session.stop"
	MethodToolCall            = "tool.call"
	MethodToolCancel          = "tool.cancel"
	MethodFsMount             = "fs.mount"
	MethodFsUnmount           = "fs.unmount"
	MethodTurnStart           = "turn.start"
	MethodTurnInput           = "turn.input"
	MethodTurnCancel          = "turn.cancel"
	MethodSessionClose        = "session.close"
	MethodInteractionResponse = "interaction.response"
	MethodCustomToolResult    = "agent.custom_tool_result"
)
