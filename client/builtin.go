package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// Tool is a client tool's declaration and handler together, as the
// builtin tool constructors (FileTools) return them.
type Tool struct {
	Def     ToolDef
	Handler ToolHandler
}

// RegisterTools registers each tool as RegisterTool does.
func (h *Harness) RegisterTools(tools ...Tool) {
	for _, t := range tools {
		h.RegisterTool(t.Def, t.Handler)
	}
}

// sessionKey is the context key under which a tool call carries its
// Session.
type sessionKey struct{}

// SessionFrom returns the Session whose tool call ctx belongs to. Handlers
// run by Session.Send get one; handlers run elsewhere (a RegisteredClient,
// a direct call) do not.
func SessionFrom(ctx context.Context) (*Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(*Session)
	return s, ok && s != nil
}

// errNoSession is the failure of a sandbox or subagent tool called
// outside a session's tool loop.
var errNoSession = errors.New("client: sandbox and subagent tools run only inside Session.Send (no session in the tool call's context)")

// builtin is the per-session state of the sandbox and subagent tools: the
// local containers the session started and its local subagents. The zero
// value is ready.
type builtin struct {
	mu     sync.Mutex
	boxes  map[boxKey]*box
	agents *agentSet
}

// agentSet returns the session's subagent tracker, creating it.
func (b *builtin) agentSet(s *Session) *agentSet {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.agents == nil {
		b.agents = newAgentSet(s)
	}
	return b.agents
}

// close cancels the running local subagents, then stops the local
// containers, reporting each (BAE's close order). Reports are best effort.
func (b *builtin) close(ctx context.Context, s *Session) {
	b.mu.Lock()
	agents := b.agents
	b.agents = nil
	boxes := b.boxes
	b.boxes = nil
	b.mu.Unlock()
	if agents != nil {
		agents.close(ctx)
	}
	for _, bx := range boxes {
		bx.stop(ctx, s)
	}
}

// jsonText renders v as the JSON text a builtin tool returns as its
// result: the model sees it as a string. Values are plain structs, maps
// and strings, so encoding cannot fail.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return string(b)
}

// errorText is an in-band error result: {"error": msg} as JSON text.
func errorText(msg string) string {
	return jsonText(struct {
		Error string `json:"error"`
	}{msg})
}
