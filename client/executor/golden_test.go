package executor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

// goldenDir holds the harness's golden frames (package proto writes
// them with -update).
const goldenDir = "../../executor/proto/testdata"

// TestGoldenFrames decodes every golden frame of the protocol the way
// this package does: DecodeLoose, then the params, result or error into
// what the executor reads. A golden frame without a case here fails, so a
// new frame gets its SDK side too.
func TestGoldenFrames(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	var seq int64 = 12
	cases := map[string]func(t *testing.T, f *proto.Frame){
		"assign": func(t *testing.T, f *proto.Frame) {
			wantCall(t, f, proto.KindRequest, proto.MethodSessionAssign, "8")
			var p proto.AssignParams
			if e := decodeParams(f.Params, &p); e != nil {
				t.Fatal(e)
			}
			want := proto.AssignParams{SessionID: "ses_1", Epoch: 3, Metadata: proto.AssignMetadata{Source: proto.SourceHarness, ProfileID: "pro_1"},
				Tools: []proto.ToolDef{{Name: "grep", InputSchema: json.RawMessage(`{}`)}}}
			if d := cmp.Diff(want, p); d != "" {
				t.Errorf("params (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]ToolDef{{Name: "grep", InputSchema: json.RawMessage(`{}`)}}, toolDefs(p.Tools)); d != "" {
				t.Errorf("tools (-want +got):\n%s", d)
			}
		},
		"close_notification": func(t *testing.T, f *proto.Frame) {
			wantCall(t, f, proto.KindNotification, proto.MethodClose, "")
			var p proto.Reason
			if e := decodeParams(f.Params, &p); e != nil || p.Reason != "shutdown" {
				t.Errorf("params %+v, %v", p, e)
			}
		},
		"error_capability_missing": func(t *testing.T, f *proto.Frame) {
			e := wantError(t, f, "1", CodeCapabilityMissing)
			if e.Reason() != proto.ReasonCapabilityMissing || !strings.Contains(string(e.Data), `"capability":"process"`) {
				t.Errorf("error %v", e)
			}
		},
		"error_conflict_sequence": func(t *testing.T, f *proto.Frame) {
			e := wantError(t, f, "2", CodeConflict)
			if d := cmp.Diff(proto.ErrorData{Reason: "sequence_gap", ExpectedSequence: &seq}, (*proto.Error)(e).Detail()); e.Reason() != "sequence_gap" || d != "" {
				t.Errorf("error %v (-want +got):\n%s", e, d)
			}
		},
		"error_parse": func(t *testing.T, f *proto.Frame) {
			if e := wantError(t, f, "", CodeParseError); e.Message != "Parse error" || e.Data != nil {
				t.Errorf("error %v", e)
			}
		},
		"register_result": func(t *testing.T, f *proto.Frame) {
			if f.Kind() != proto.KindResponse || string(f.ID) != `"r1"` || f.Error != nil {
				t.Fatalf("frame %+v", f)
			}
			if _, ours := numericID(f); ours {
				t.Error("a string id counted as one of ours")
			}
			var r proto.RegisterResult
			if err := json.Unmarshal(f.Result, &r); err != nil {
				t.Fatal(err)
			}
			want := proto.RegisterResult{ExecutorID: "exe_1", ConnectionID: "exc_1", HeartbeatIntervalMS: 10000, LeaseExpiresAt: at,
				TokenExpiresAt: at.Add(time.Hour), Sessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: 4}}}
			if d := cmp.Diff(want, r); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		},
		"tool_call": func(t *testing.T, f *proto.Frame) {
			wantCall(t, f, proto.KindRequest, proto.MethodToolCall, "7")
			var p proto.ToolCallParams
			if e := decodeParams(f.Params, &p); e != nil {
				t.Fatal(e)
			}
			want := proto.ToolCallParams{SessionID: "ses_1", ToolCallID: "toolu_1", Name: "grep", Input: json.RawMessage(`{"pattern":"a<b"}`), TimeoutMS: 30000}
			if d := cmp.Diff(want, p); d != "" {
				t.Errorf("params (-want +got):\n%s", d)
			}
		},
	}
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.golden"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden frames in %s: %v", goldenDir, err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".golden")
		t.Run(name, func(t *testing.T) {
			check, ok := cases[name]
			if !ok {
				t.Fatalf("golden frame %s has no SDK case", name)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, e := proto.DecodeLoose(b)
			if e != nil {
				t.Fatalf("the executor rejects the golden frame: %v", e)
			}
			check(t, f)
		})
	}
}

func wantCall(t *testing.T, f *proto.Frame, kind proto.Kind, method, id string) {
	t.Helper()
	if f.Kind() != kind || f.Method != method || string(f.ID) != id {
		t.Fatalf("frame kind %d method %q id %q, want %d %q %q", f.Kind(), f.Method, f.ID, kind, method, id)
	}
}

// wantError checks an error response with id ("" for none) and code and
// returns the error as callers see it.
func wantError(t *testing.T, f *proto.Frame, id string, code int) *RPCError {
	t.Helper()
	if f.Kind() != proto.KindResponse || f.Error == nil || f.Result != nil || string(f.ID) != id || f.Error.Code != code {
		t.Fatalf("frame %+v, want error %d with id %q", f, code, id)
	}
	return (*RPCError)(f.Error)
}
