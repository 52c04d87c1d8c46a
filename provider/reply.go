package provider

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

// Reply is a model reply in the canonical (Anthropic Messages) form on its
// way back to a caller of a served model API (the model gateway), whichever
// provider answered. The anthropic and openai packages write it in their
// API's shape.
type Reply struct {
	ID      string
	Model   string // the model the caller asked for, echoed
	Created time.Time
	Content json.RawMessage // the canonical content block array
	// Blocks are the objects of Content, decoded with their Raw bytes and
	// Input set ({} when absent).
	Blocks []baton.Block
	Stop   string // a canonical stop reason
	Usage  baton.Usage
}

// Canonical stop reasons (the Messages API's stop_reason).
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
)

// Invalid is the failure of a served API's request that the caller must
// fix: a baton.ECodeBadRequest with a caller-facing message.
func Invalid(format string, args ...any) error {
	return baton.Errorf(baton.ECodeBadRequest, "%s", fmt.Sprintf(format, args...))
}
