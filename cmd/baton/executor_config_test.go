package main

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/machine"
)

const goodExecutorConfig = `# tools of an environment
[[tools]]
name = "upper"
description = "Upper-case a text"
input_schema = '{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}'
command = "printf %s {text} | tr a-z A-Z"
timeout = "30s"
max_output = 1024

[[tools]]
name = "grep"
command = ["grep", "-n", "--", "{pattern}", "notes.txt"]
[tools.input_schema]
type = "object"
properties.pattern.type = "string"

[[tools]]
name = "stdin-json"
command = ["sh", "-c", "cat"]
`

func TestExecutorCmdConfigGood(t *testing.T) {
	t.Parallel()
	c, err := parseExecConfig("executor.toml", []byte(goodExecutorConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := []machine.ToolSpec{
		{
			Def: executor.ToolDef{Name: "upper", Description: "Upper-case a text",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
			Script: "printf %s {text} | tr a-z A-Z", Params: []string{"text"}, Timeout: 30 * time.Second, MaxOutput: 1024,
		},
		{
			Def:  executor.ToolDef{Name: "grep", InputSchema: json.RawMessage(`{"properties":{"pattern":{"type":"string"}},"type":"object"}`)},
			Argv: []string{"grep", "-n", "--", "{pattern}", "notes.txt"}, Params: []string{"pattern"},
			Timeout: defaultToolTimeout, MaxOutput: defaultToolOutput,
		},
		{
			Def:  executor.ToolDef{Name: "stdin-json"},
			Argv: []string{"sh", "-c", "cat"}, Timeout: defaultToolTimeout, MaxOutput: defaultToolOutput,
		},
	}
	if diff := cmp.Diff(want, c.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if c.Process != nil || c.Agent != nil {
		t.Errorf("process %+v agent %+v", c.Process, c.Agent)
	}
	if err := c.forScope(executor.ScopeEnvironment); err != nil {
		t.Errorf("forScope(environment): %v", err)
	}
	if err := c.forScope(executor.ScopeMachine); err == nil || !strings.Contains(err.Error(), "executor.toml:2:3: [[tools]] on a machine") {
		t.Errorf("forScope(machine): %v", err)
	}
}

func TestExecutorCmdConfigMachine(t *testing.T) {
	t.Parallel()
	c, err := parseExecConfig("m.toml", []byte(`
[process]
max_sessions = 3
max_output = 4096

[agent]
type = "builtin"
model = "claude-x"
system = "be brief"
max_steps = 5
custom_tool_timeout = "1m"

[[tools]]
name = "t"
command = ["true"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&machine.ProcessSpec{MaxSessions: 3, MaxOutput: 4096, IdleTimeout: defaultSandboxIdle}, c.Process); diff != "" {
		t.Errorf("process (-want +got):\n%s", diff)
	}
	wantAgent := &machine.AgentSpec{Type: machine.AgentBuiltin, Model: "claude-x", MaxTokens: defaultAgentTokens, System: "be brief",
		MaxSteps: 5, CustomToolTimeout: time.Minute}
	if diff := cmp.Diff(wantAgent, c.Agent); diff != "" {
		t.Errorf("agent (-want +got):\n%s", diff)
	}
	if err := c.forScope(executor.ScopeMachine); err != nil {
		t.Errorf("forScope(machine): %v", err)
	}
	if err := c.forScope(executor.ScopeEnvironment); err == nil || err.Error() != "m.toml:2:2: [process] is for machines (--machine), not environments" {
		t.Errorf("forScope(environment): %v", err)
	}

	c, err = parseExecConfig("m.toml", []byte(`[agent]
type = "command"
command = ["claude", "-p", "--model", "{model}"]
timeout = "20m"
`))
	if err != nil {
		t.Fatal(err)
	}
	wantAgent = &machine.AgentSpec{Type: machine.AgentCommand, Model: defaultAgentModel, CustomToolTimeout: defaultCustomTimeout,
		Command: []string{"claude", "-p", "--model", "{model}"}, Timeout: 20 * time.Minute}
	if diff := cmp.Diff(wantAgent, c.Agent); diff != "" {
		t.Errorf("command agent (-want +got):\n%s", diff)
	}
}

// TestExecutorCmdConfigErrors lists every error of the file with where it
// points.
func TestExecutorCmdConfigErrors(t *testing.T) {
	t.Parallel()
	tool := func(body string) string { return "[[tools]]\nname = \"t\"\n" + body }
	cases := []struct{ name, doc, want string }{
		{"syntax", "[[tools]\n", "x.toml:1:8: "},
		{"unknown top key", "nope = 1\n", `x.toml:1:1: unknown key "nope"`},
		{"unknown tool key", tool("command = [\"true\"]\nshell = true\n"), `x.toml:4:1: unknown key "tools.shell"`},
		{"unknown process key", "[process]\nisolated = true\n", `x.toml:2:1: unknown key "process.isolated"`},
		{"unknown agent key", "[agent]\nmodle = \"x\"\n", `x.toml:2:1: unknown key "agent.modle"`},
		{"wrong type", "[[tools]]\nname = 3\n", "x.toml:2:8: cannot decode TOML integer"},
		{"wrong type max_output", tool("command = [\"true\"]\nmax_output = \"big\"\n"), "x.toml:4:14: cannot decode TOML string"},
		{"agent command a string", "[agent]\ntype = \"command\"\ncommand = \"claude\"\n", "x.toml:3:11: cannot decode TOML string"},
		{"missing name", "[[tools]]\ncommand = [\"true\"]\n", `x.toml:1:3: tools[0]: missing key "name"`},
		{"bad name", "[[tools]]\nname = \"a b\"\ncommand = [\"true\"]\n", `x.toml:2:1: tools[0].name: "a b" must be 1 to 64 letters`},
		{"duplicate name", tool("command = [\"true\"]\n") + tool("command = [\"true\"]\n"), `x.toml:5:1: tools[1].name: tool "t" is declared twice`},
		{"missing command", tool(""), `x.toml:1:3: tools[0]: missing key "command"`},
		{"empty command", tool("command = []\n"), "x.toml:3:1: tools[0].command: the command is empty"},
		{"empty script", tool("command = \"  \"\n"), "x.toml:3:1: tools[0].command: the script is empty"},
		{"command of numbers", tool("command = [\"echo\", 1]\n"), "x.toml:3:20: tools[0].command[1]: expected a string"},
		{"command a table", tool("command = {a = 1}\n"), "x.toml:3:1: tools[0].command: expected an array of strings or a script string"},
		{"empty program", tool("command = [\"\"]\n"), "x.toml:3:1: tools[0].command: the program is empty"},
		{"placeholder program", tool("input_schema = '{\"type\":\"object\",\"properties\":{\"p\":{}}}'\ncommand = [\"{p}\"]\n"),
			"x.toml:4:1: tools[0].command: the program cannot be a placeholder"},
		{"embedded placeholder", tool("input_schema = '{\"type\":\"object\",\"properties\":{\"p\":{}}}'\ncommand = [\"sh\", \"-c\", \"echo {p}\"]\n"),
			`x.toml:4:1: tools[0].command: element 2: a placeholder must be a whole element ("echo {p}")`},
		{"unknown argv placeholder", tool("command = [\"echo\", \"{p}\"]\n"), "x.toml:3:1: tools[0].command: element 1: {p} is not a property of input_schema"},
		{"unknown script placeholder", tool("command = \"echo {who}\"\n"), "x.toml:3:1: tools[0].command: {who} is not a property of input_schema (write ${who} for a shell variable)"},
		{"schema not json", tool("input_schema = '{nope'\ncommand = [\"true\"]\n"), "x.toml:3:1: tools[0].input_schema: not a JSON object"},
		{"schema not object", tool("input_schema = '{\"type\":\"string\"}'\ncommand = [\"true\"]\n"), `x.toml:3:1: tools[0].input_schema: "type" must be "object"`},
		{"schema a number", tool("input_schema = 3\ncommand = [\"true\"]\n"), "x.toml:3:1: tools[0].input_schema: expected a JSON object in a string, or a table"},
		{"schema table not object", tool("command = [\"true\"]\n[tools.input_schema]\ntype = \"array\"\n"), `x.toml:4:8: tools[0].input_schema: "type" must be "object"`},
		{"bad timeout", tool("command = [\"true\"]\ntimeout = \"soon\"\n"), `x.toml:4:1: tools[0].timeout: "soon" is not a positive duration`},
		{"zero timeout", tool("command = [\"true\"]\ntimeout = \"0s\"\n"), `x.toml:4:1: tools[0].timeout: "0s" is not a positive duration`},
		{"output cap", tool("command = [\"true\"]\nmax_output = 0\n"), "x.toml:4:1: tools[0].max_output: 0 must be between 1 and"},
		{"negative sessions", "[process]\nmax_sessions = -1\n", "x.toml:2:1: process.max_sessions: -1 must not be negative"},
		{"process output cap", "[process]\nmax_output = 99999999999\n", "x.toml:2:1: process.max_output: 99999999999 must be between"},
		{"image without isolate", "[process]\nimage = \"busybox\"\n", "x.toml:2:1: process.image: only used with isolate = true"},
		{"bad idle", "[process]\nidle_timeout = \"-1s\"\n", `x.toml:2:1: process.idle_timeout: "-1s" is not a positive duration`},
		{"agent type", "[agent]\ntype = \"robot\"\n", `x.toml:2:1: agent.type: "robot" must be "builtin" or "command"`},
		{"agent negative sessions", "[agent]\nmax_sessions = -2\n", "x.toml:2:1: agent.max_sessions: -2 must not be negative"},
		{"builtin with command", "[agent]\ncommand = [\"x\"]\n", `x.toml:2:1: agent.command: only used with type = "command"`},
		{"builtin tokens", "[agent]\nmax_tokens = -5\n", "x.toml:2:1: agent.max_tokens: -5 must be positive"},
		{"builtin steps", "[agent]\nmax_steps = -5\n", "x.toml:2:1: agent.max_steps: -5 must be positive"},
		{"builtin custom timeout", "[agent]\ncustom_tool_timeout = \"x\"\n", `x.toml:2:1: agent.custom_tool_timeout: "x" is not a positive duration`},
		{"command without command", "[agent]\ntype = \"command\"\n", `x.toml:1:2: agent: type = "command" needs "command"`},
		{"command with system", "[agent]\ntype = \"command\"\ncommand = [\"a\"]\nsystem = \"s\"\n", `x.toml:4:1: agent.system: only used with type = "builtin"`},
		{"command placeholder", "[agent]\ntype = \"command\"\ncommand = [\"a\", \"{prompt}\"]\n", "x.toml:3:1: agent.command: element 1: {prompt} is not a property of input_schema"},
		{"command timeout", "[agent]\ntype = \"command\"\ncommand = [\"a\"]\ntimeout = \"1x\"\n", `x.toml:4:1: agent.timeout: "1x" is not a positive duration`},
	}
	if runtime.GOOS == "linux" {
		cases = append(cases,
			struct{ name, doc, want string }{"isolate without image", "[process]\nisolate = true\nrootfs_dir = \"/r\"\n", `x.toml:1:2: process: isolate = true needs "image"`},
			struct{ name, doc, want string }{"isolate without rootfs", "[process]\nisolate = true\nimage = \"b\"\n", `x.toml:1:2: process: isolate = true needs "rootfs_dir"`},
		)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseExecConfig("x.toml", []byte(tc.doc))
			var ce *configError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *configError", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error\n  %s\nwant prefix\n  %s", err, tc.want)
			}
		})
	}
}

func TestExecutorCmdConfigScope(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, doc, scope, want string }{
		{"environment without tools", "", executor.ScopeEnvironment, "x.toml: an environment executor needs at least one [[tools]] entry"},
		{"environment with agent", "[agent]\n", executor.ScopeEnvironment, "x.toml:1:2: [agent] is for machines (--machine), not environments"},
		{"machine tools for a command agent", "[[tools]]\nname = \"t\"\ncommand = [\"true\"]\n[agent]\ntype = \"command\"\ncommand = [\"a\"]\n",
			executor.ScopeMachine, `x.toml:1:3: [[tools]] on a machine are the builtin brain's tools: they need [agent] with type = "builtin"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseExecConfig("x.toml", []byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.forScope(tc.scope); err == nil || err.Error() != tc.want {
				t.Errorf("forScope: %v, want %s", err, tc.want)
			}
		})
	}
}

// FuzzExecutorCmdConfig feeds arbitrary files to the parser: it returns a
// config or a *configError, never panics, and a config it returns is
// valid for some scope or says why not with a *configError.
func FuzzExecutorCmdConfig(f *testing.F) {
	f.Add([]byte(goodExecutorConfig))
	f.Add([]byte("[process]\nisolate = true\nimage = \"b\"\nrootfs_dir = \"/r\"\n[agent]\ntype = \"command\"\ncommand = [\"a\", \"{model}\"]\n"))
	f.Add([]byte("tools = [{name = \"a\", command = \"echo {x}\", input_schema = '{\"type\":\"object\",\"properties\":{\"x\":{}}}'}]"))
	f.Add([]byte("[[tools]]\n[tools.input_schema]\n[[tools]]\n"))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := parseExecConfig("f.toml", doc)
		if err != nil {
			var ce *configError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is a %T", err, err)
			}
			return
		}
		for _, scope := range []string{executor.ScopeEnvironment, executor.ScopeMachine} {
			if err := c.forScope(scope); err != nil {
				var ce *configError
				if !errors.As(err, &ce) {
					t.Fatalf("forScope error %v is a %T", err, err)
				}
			}
		}
	})
}
