package machine

import (
	"time"

	"github.com/baton-engine/baton/client/executor"
)

// Agent kinds of AgentSpec.Type.
const (
	AgentBuiltin = "builtin" // Baton's own loop on the Messages API (Brain)
	AgentCommand = "command" // a CLI agent run per turn (CommandAgent)
)

// ToolSpec is a tool backed by a command.
type ToolSpec struct {
	Def       executor.ToolDef
	Argv      []string // the command as argv; each element may be one whole {param}
	Script    string   // or a sh -c script whose {param}s are shell-quoted
	Params    []string // the input_schema's property names
	Timeout   time.Duration
	MaxOutput int // bytes kept of stdout and of stderr
}

// ProcessSpec is the remote shell of a machine.
type ProcessSpec struct {
	MaxSessions int
	MaxOutput   int
	Isolate     bool          // run commands in process-driver sandboxes
	Image       string        // the sandbox image (Isolate)
	RootfsDir   string        // where images' root filesystems are (Isolate)
	IdleTimeout time.Duration // an idle session's sandbox is stopped after it
}

// AgentSpec is the brain of a machine.
type AgentSpec struct {
	Type              string // AgentBuiltin or AgentCommand
	MaxSessions       int
	Model             string
	MaxTokens         int
	System            string
	MaxSteps          int
	CustomToolTimeout time.Duration
	Command           []string      // AgentCommand: argv with {model}, {session_id}, {turn_id}
	Timeout           time.Duration // AgentCommand: bound of one run (0: none)
}
