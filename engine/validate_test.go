package engine

import (
	"testing"

	"github.com/baton-engine/baton"
)

func TestPlaceholders(t *testing.T) {
	tests := []struct {
		tmpl, via string
		ok        bool
	}{
		{"claude -p --model {model}", "stdin", true},
		{"claude -p {prompt}", "arg", true},
		{"claude {model} {prompt}", "arg", true},
		{"claude", "arg", false},              // arg needs exactly one {prompt}
		{"a {prompt} {prompt}", "arg", false}, // not two
		{"a {prompt}", "stdin", false},        // stdin takes none
		{"a {cwd}", "stdin", false},           // unknown placeholder
		{"a {model", "stdin", false},          // unbalanced
		{"a model}", "stdin", false},          // unbalanced
		{"a {}", "stdin", false},              // empty placeholder
		{"a {model}", "file", false},          // bad prompt_via fails here first
		{"{model}{model}", "stdin", true},     // repeats of model are fine
	}
	for _, tc := range tests {
		if got := placeholdersValid(tc.tmpl, tc.via); got != tc.ok {
			t.Errorf("placeholdersValid(%q, %q) = %v, want %v", tc.tmpl, tc.via, got, tc.ok)
		}
	}
}

func TestCheckSubagentTools(t *testing.T) {
	zero := uint64(0)
	good := func() baton.SubagentToolDef {
		return baton.SubagentToolDef{Name: "launch", Image: "img", Subagents: []baton.SubagentDef{
			{Harness: "claude", CommandTemplate: "claude -p", PromptVia: "stdin"},
		}}
	}
	tests := []struct {
		name string
		mut  func(*baton.SubagentToolDef)
		code string
		msg  string // BAE's detail text
	}{
		{"valid", func(*baton.SubagentToolDef) {}, "", ""},
		{"blank name", func(d *baton.SubagentToolDef) { d.Name = " " }, baton.ECodeInvalidSubagentTools, "tool name must be a non-empty string"},
		{"reserved", func(d *baton.SubagentToolDef) { d.Name = reservedToolName }, baton.ECodeReservedToolName, "remote_subagent_status is reserved"},
		{"no image", func(d *baton.SubagentToolDef) { d.Image = "" }, baton.ECodeInvalidSubagentTools, "image and non-empty subagents are required"},
		{"no subagents", func(d *baton.SubagentToolDef) { d.Subagents = nil }, baton.ECodeInvalidSubagentTools, "image and non-empty subagents are required"},
		{"blank harness", func(d *baton.SubagentToolDef) { d.Subagents[0].Harness = "" }, baton.ECodeInvalidSubagentTools, "harness must be non-empty and unique"},
		{"duplicate harness", func(d *baton.SubagentToolDef) { d.Subagents = append(d.Subagents, d.Subagents[0]) }, baton.ECodeInvalidSubagentTools, "harness must be non-empty and unique"},
		{"blank template", func(d *baton.SubagentToolDef) { d.Subagents[0].CommandTemplate = " " }, baton.ECodeInvalidSubagentTools, "invalid command_template placeholders"},
		{"bad placeholder", func(d *baton.SubagentToolDef) { d.Subagents[0].CommandTemplate = "x {cwd}" }, baton.ECodeInvalidSubagentTools, "invalid command_template placeholders"},
		{"bad prompt_via", func(d *baton.SubagentToolDef) { d.Subagents[0].PromptVia = "file" }, baton.ECodeInvalidSubagentTools, "invalid command_template placeholders"},
		{"zero timeout", func(d *baton.SubagentToolDef) { d.Subagents[0].TimeoutSecs = &zero }, baton.ECodeInvalidSubagentTools, "timeout_secs must be a positive integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := good()
			tc.mut(&d)
			err := checkSubagentTools([]baton.SubagentToolDef{d})
			if got := baton.ErrorCode(err); got != tc.code {
				t.Fatalf("code %q, want %q (err %v)", got, tc.code, err)
			}
			if err != nil && baton.ErrorMessage(err) != tc.msg {
				t.Errorf("message %q, want %q", baton.ErrorMessage(err), tc.msg)
			}
		})
	}
}
