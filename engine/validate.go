package engine

import (
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/serde"
)

// checkDeclarations runs BAE's client API checks 4–6 on an open or join
// request: reserved names, the tool allowlist, then subagent declarations.
func checkDeclarations(p *baton.Profile, req *baton.OpenRequest) error {
	for _, list := range [][]baton.ToolDef{req.Tools, req.SandboxTools} {
		for _, t := range list {
			if t.Name == reservedToolName {
				return baton.Errorf(baton.ECodeReservedToolName, "%s is reserved", reservedToolName)
			}
		}
	}
	for _, t := range req.Tools {
		if !p.Allows(t.Name) {
			return baton.Errorf(baton.ECodeToolNotAllowed, "tool %s is not in the profile's allowlist", serde.Quote(t.Name))
		}
	}
	return checkSubagentTools(req.SubagentTools)
}

// checkSubagentTools validates remote subagent declarations
// (BAE's client API), with BAE's detail texts. PromptVia must already be
// defaulted to "stdin".
func checkSubagentTools(tools []baton.SubagentToolDef) error {
	invalid := func(msg string) error { return baton.Errorf(baton.ECodeInvalidSubagentTools, "%s", msg) }
	for _, t := range tools {
		if strings.TrimSpace(t.Name) == "" {
			return invalid("tool name must be a non-empty string")
		}
		if t.Name == reservedToolName {
			return baton.Errorf(baton.ECodeReservedToolName, "%s is reserved", reservedToolName)
		}
		if strings.TrimSpace(t.Image) == "" || len(t.Subagents) == 0 {
			return invalid("image and non-empty subagents are required")
		}
		seen := make(map[string]bool, len(t.Subagents))
		for _, s := range t.Subagents {
			if strings.TrimSpace(s.Harness) == "" || seen[s.Harness] {
				return invalid("harness must be non-empty and unique")
			}
			seen[s.Harness] = true
			if strings.TrimSpace(s.CommandTemplate) == "" || !placeholdersValid(s.CommandTemplate, s.PromptVia) {
				return invalid("invalid command_template placeholders")
			}
			if s.PromptVia != "stdin" && s.PromptVia != "arg" { // placeholdersValid fails first
				return invalid(`prompt_via must be "stdin" or "arg"`)
			}
			if s.TimeoutSecs != nil && *s.TimeoutSecs == 0 {
				return invalid("timeout_secs must be a positive integer")
			}
		}
	}
	return nil
}

// placeholdersValid accepts only {model} and {prompt}, balanced braces, and
// exactly one {prompt} for prompt_via "arg" (none for "stdin"). Any other
// prompt_via fails here first, as in BAE.
func placeholdersValid(tmpl, promptVia string) bool {
	prompts := 0
	for i := 0; i < len(tmpl); i++ {
		switch tmpl[i] {
		case '}':
			return false
		case '{':
			end := strings.IndexByte(tmpl[i:], '}')
			if end < 0 {
				return false
			}
			switch tmpl[i+1 : i+end] {
			case "model":
			case "prompt":
				prompts++
			default:
				return false
			}
			i += end
		}
	}
	switch promptVia {
	case "arg":
		return prompts == 1
	case "stdin":
		return prompts == 0
	}
	return false
}
