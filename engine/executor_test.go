package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
)

// fakeHands is a hand-written baton.ExecutorHands that lists fixed tools.
type fakeHands struct {
	tools []baton.ExecutorTool
	asked [][]string
}

func (f *fakeHands) Tools(envIDs []string) []baton.ExecutorTool {
	f.asked = append(f.asked, envIDs)
	return f.tools
}

func (f *fakeHands) Call(context.Context, baton.ExecutorCall) (baton.ExecutorResult, error) {
	return baton.ExecutorResult{}, nil
}

func (f *fakeHands) Release(string) {}

func etool(env, name string) baton.ExecutorTool {
	return baton.ExecutorTool{EnvironmentID: env, ToolDef: baton.ToolDef{Name: name}}
}

// TestWithExecutors: executor tools are advertised after what the turn
// already has, each name once, and route to their environment.
func TestWithExecutors(t *testing.T) {
	hands := &fakeHands{tools: []baton.ExecutorTool{
		etool("env_a", "lookup"),
		etool("env_a", "get_time"),           // the client declared it
		etool("env_a", "shell"),              // a sandbox tool
		etool("env_a", "search"),             // an MCP tool
		etool("env_a", reservedToolName),     // reserved
		etool("env_a", "client__laptop__ls"), // a registered client's prefix
		etool("env_b", "lookup"),             // listed twice: the first wins
		{EnvironmentID: "env_b", ToolDef: baton.ToolDef{Name: "fetch", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}},
	}}
	tc := &turnCtx{e: &Engine{executors: hands}}
	s := &baton.Session{
		ClientTools:  map[string][]baton.ToolDef{"k": {{Name: "get_time"}}},
		SandboxTools: map[string][]baton.ToolDef{"k": {{Name: "shell"}}},
	}
	base := toolsFor(s, "k")
	base.mcp = map[string]string{"search": "srv"}
	prof := &baton.Profile{ID: "pro_1", ExecutorEnvironments: []string{"env_a", "env_b"}}

	ts := tc.withExecutors(prof, base)
	var names []string
	for _, d := range ts.defs {
		var x struct{ Name string }
		_ = json.Unmarshal(d, &x)
		names = append(names, x.Name)
	}
	if diff := cmp.Diff([]string{"get_time", "shell", "lookup", "fetch"}, names); diff != "" {
		t.Fatalf("advertised (-want +got):\n%s", diff)
	}
	want := map[string]execTarget{"lookup": {"env_a", "pro_1"}, "fetch": {"env_b", "pro_1"}}
	if diff := cmp.Diff(want, ts.executor, cmp.AllowUnexported(execTarget{})); diff != "" {
		t.Fatalf("routes (-want +got):\n%s", diff)
	}
	for name, kind := range map[string]baton.Dispatch{"lookup": baton.DispatchExecutor, "get_time": baton.DispatchClient, "search": baton.DispatchMCP, "fetch": baton.DispatchExecutor} {
		if got := ts.classify(name); got != kind {
			t.Errorf("classify(%s) = %s, want %s", name, got, kind)
		}
	}
	if string(ts.defs[2]) != `{"name":"lookup","description":null,"input_schema":{"type":"object"}}` {
		t.Errorf("default schema: %s", ts.defs[2])
	}
	if len(base.defs) != 2 || base.executor != nil {
		t.Error("the turn's base toolset was changed")
	}
	if !cmp.Equal(hands.asked, [][]string{{"env_a", "env_b"}}) {
		t.Errorf("asked for %v", hands.asked)
	}
	if got := tc.withExecutors(&baton.Profile{}, base); got != base {
		t.Error("a profile without environments got executor tools")
	}
}

func TestExecutorContent(t *testing.T) {
	for in, want := range map[string]string{
		``:                             `[]`,
		`null`:                         `[]`,
		`"plain"`:                      `[{"text":"plain","type":"text"}]`,
		`{"stdout":"x"}`:               `[{"text":"{\"stdout\":\"x\"}","type":"text"}]`,
		`[{"type":"text","text":"a"}]`: `[{"type":"text","text":"a"}]`,
		`[1,2]`:                        `[{"text":"[1,2]","type":"text"}]`,
		`[{"type":"artifact","artifact_id":"art_1","name":"out.log","media_type":"text/plain","size":42}]`: `[{"text":"[artifact art_1: out.log (text/plain, 42 bytes)]","type":"text"}]`,
	} {
		if got := string(executorContent(json.RawMessage(in))); got != want {
			t.Errorf("executorContent(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzExecutorContent: any content an executor sends becomes a valid
// JSON array of objects for the tool_result.
func FuzzExecutorContent(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `"s"`, `{"a":1}`, `[]`, `[1]`, `[{"type":"text","text":"a"}]`,
		`[{"type":"artifact","artifact_id":"a","name":"n","media_type":"m","size":1},{"type":"image"}]`, `[{"type":7}]`, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := executorContent(json.RawMessage(raw))
		var blocks []map[string]json.RawMessage
		if err := json.Unmarshal(out, &blocks); err != nil {
			t.Fatalf("content %s from %q: %v", out, raw, err)
		}
		for _, b := range blocks {
			if b == nil {
				t.Fatalf("a null block in %s", out)
			}
		}
	})
}
