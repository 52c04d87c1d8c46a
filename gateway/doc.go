// Package gateway serves a brain executor's way back into its session on
// the client port (bma.executor.v1.1, Brain): the model gateway and the
// session's tools over MCP.
//
// The model gateway takes Anthropic Messages requests at
// POST /v1/model/v1/messages and OpenAI Chat Completions requests at
// POST /v1/model/v1/chat/completions, authorized by a model token
// (Authorization: Bearer, or x-api-key on the Anthropic route). The token
// names the session and the turn; the turn must still be active. The
// request is translated to the canonical (Anthropic-shaped) form and runs
// through the session profile's provider chain with retries and failover,
// exactly like a server turn's model call, with provider.request and
// provider.response events on the session. The reply is translated back to
// the caller's format: JSON, or a server-sent event stream when the
// request asked for stream:true. The wire formats themselves (decoding,
// translation, replies, error bodies) are provider/anthropic's and
// provider/openai's. Failover needs the whole reply, so a
// stream is written once the provider chain has answered.
//
// The tools endpoint, /v1/sessions/{id}/mcp, is a streamable-HTTP MCP
// server (official Go SDK, stateless) authorized by a tools token bound to
// the turn and its epoch. Each request sees the session's current
// server-side tools; calls run through the engine and are recorded like a
// server turn's tool calls.
package gateway
