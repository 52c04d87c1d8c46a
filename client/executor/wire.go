package executor

import (
	"bytes"
	"encoding/json"

	"github.com/baton-engine/baton/executor/proto"
)

// The protocol's params and results are package proto's. What is here
// turns them into this package's API types and back, and answers params
// that do not fit.

// registerParams is proto.RegisterParams as an executor sends it: its
// capabilities declare the tools as ToolDefs, which leave out a missing
// description where proto.ToolDef (the harness's rule) writes null.
type registerParams struct {
	Protocol      string        `json:"protocol"`
	ExecutorID    string        `json:"executor_id,omitempty"`
	EnvironmentID string        `json:"environment_id"`
	Capabilities  registerCaps  `json:"capabilities"`
	Resume        *proto.Resume `json:"resume,omitempty"`
}

// registerCaps is proto.Capabilities with ToolDefs (see registerParams).
type registerCaps struct {
	Tools   []ToolDef                `json:"tools,omitempty"`
	Process *proto.ProcessCapability `json:"process,omitempty"`
	Agent   *proto.AgentCapability   `json:"agent,omitempty"`
	FS      *proto.FSCapability      `json:"fs,omitempty"`
}

// toolDefs returns the protocol's tool declarations as ToolDefs.
func toolDefs(ws []proto.ToolDef) []ToolDef {
	if ws == nil {
		return nil
	}
	out := make([]ToolDef, len(ws))
	for i, w := range ws {
		out[i] = ToolDef{Name: w.Name, InputSchema: w.InputSchema}
		if w.Description != nil {
			out[i].Description = *w.Description
		}
	}
	return out
}

// turnMetadata is turn.start's metadata as the API shows it.
func turnMetadata(m proto.TurnMetadata) TurnMetadata {
	return TurnMetadata{
		ModelBaseURL:        m.ModelBaseURL,
		ModelToken:          m.ModelToken,
		ModelTokenExpiresAt: m.ModelTokenExpiresAt,
		ToolsMCPURL:         m.ToolsMCPURL,
		ToolsMCPToken:       m.ToolsMCPToken,
		CustomTools:         toolDefs(m.CustomTools),
		Epoch:               m.Epoch,
		WorkspacePath:       m.WorkspacePath,
	}
}

// decodeParams unmarshals request params, answering -32602 when they do
// not fit.
func decodeParams(raw json.RawMessage, v any) *RPCError {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return rpcErr(CodeInvalidParams, "invalid params: "+err.Error(), nil)
	}
	return nil
}

// require answers -32602 for the first empty value of name/value pairs.
func require(pairs ...string) *RPCError {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return rpcErr(CodeInvalidParams, "invalid params: "+pairs[i]+" is required", nil)
		}
	}
	return nil
}

func isNull(b json.RawMessage) bool { return b != nil && string(bytes.TrimSpace(b)) == "null" }

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}
