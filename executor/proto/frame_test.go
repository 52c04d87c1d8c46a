package proto

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecode(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   Kind
		code   int    // expected error code; 0 = ok
		id     string // id carried by the returned frame
		method string
		call   bool // a failed frame that had a method member
	}{
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"executor.heartbeat","params":{"active_sessions":[]}}`, kind: KindRequest, id: "1", method: "executor.heartbeat"},
		{name: "string id", in: ` {"jsonrpc":"2.0","id":"a-1","method":"m"}`, kind: KindRequest, id: `"a-1"`, method: "m"},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"tool.progress","params":[1]}`, kind: KindNotification, method: "tool.progress"},
		{name: "result", in: `{"jsonrpc":"2.0","id":9,"result":{"accepted":true}}`, kind: KindResponse, id: "9"},
		{name: "null result", in: `{"jsonrpc":"2.0","id":9,"result":null}`, kind: KindResponse, id: "9"},
		{name: "error", in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, kind: KindResponse, id: "null"},
		{name: "syntax", in: `{"jsonrpc":`, code: CodeParseError},
		{name: "empty", in: ``, code: CodeParseError},
		{name: "invalid utf-8 in a result", in: "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tool.result\",\"params\":{\"content\":\"hi \xff\xfe\"}}", code: CodeParseError},
		{name: "invalid utf-8 in a response", in: "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"text\":\"\xed\xa0\x80\"}}", code: CodeParseError},
		{name: "utf-8 and a lone surrogate escape", in: `{"jsonrpc":"2.0","id":9,"result":{"text":"日本 🙂 \ud800"}}`, kind: KindResponse, id: "9"},
		{name: "array", in: `[{"jsonrpc":"2.0","method":"m"}]`, code: CodeInvalidRequest},
		{name: "scalar", in: `"x"`, code: CodeInvalidRequest},
		{name: "bad version", in: `{"jsonrpc":"1.0","id":3,"method":"m"}`, code: CodeInvalidRequest, id: "3", call: true},
		{name: "no version", in: `{"id":3,"method":"m"}`, code: CodeInvalidRequest, id: "3", call: true},
		{name: "method not string", in: `{"jsonrpc":"2.0","id":4,"method":5}`, code: CodeInvalidRequest, id: "4", call: true},
		{name: "empty method", in: `{"jsonrpc":"2.0","id":4,"method":""}`, code: CodeInvalidRequest, id: "4", call: true},
		{name: "long method", in: `{"jsonrpc":"2.0","id":4,"method":"` + strings.Repeat("m", 200) + `"}`, code: CodeInvalidRequest, id: "4", call: true},
		{name: "null id request", in: `{"jsonrpc":"2.0","id":null,"method":"m"}`, code: CodeInvalidRequest, id: "null", call: true},
		{name: "bool id", in: `{"jsonrpc":"2.0","id":true,"method":"m"}`, code: CodeInvalidRequest},
		{name: "long id", in: `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 300) + `","method":"m"}`, code: CodeInvalidRequest},
		{name: "scalar params", in: `{"jsonrpc":"2.0","id":5,"method":"m","params":3}`, code: CodeInvalidRequest, id: "5", call: true},
		{name: "request with result", in: `{"jsonrpc":"2.0","id":5,"method":"m","result":{}}`, code: CodeInvalidRequest, id: "5", call: true},
		{name: "response without id", in: `{"jsonrpc":"2.0","result":{}}`, code: CodeInvalidRequest},
		{name: "result and error", in: `{"jsonrpc":"2.0","id":6,"result":{},"error":{"code":1,"message":"x"}}`, code: CodeInvalidRequest, id: "6"},
		{name: "neither", in: `{"jsonrpc":"2.0","id":6}`, code: CodeInvalidRequest, id: "6"},
		{name: "bad error", in: `{"jsonrpc":"2.0","id":6,"error":"boom"}`, code: CodeInvalidRequest, id: "6"},
		{name: "null id result", in: `{"jsonrpc":"2.0","id":null,"result":1}`, code: CodeInvalidRequest, id: "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, e := Decode([]byte(tc.in))
			if tc.code != 0 {
				if e == nil || e.Code != tc.code {
					t.Fatalf("error %v, want code %d", e, tc.code)
				}
				var id string
				if f != nil {
					id = string(f.ID)
					if f.call != tc.call {
						t.Errorf("call = %v, want %v", f.call, tc.call)
					}
				}
				if id != tc.id {
					t.Errorf("id %q, want %q", id, tc.id)
				}
				return
			}
			if e != nil {
				t.Fatalf("unexpected error %v", e)
			}
			if f.Kind() != tc.kind || string(f.ID) != tc.id || f.Method != tc.method {
				t.Fatalf("got kind %d id %q method %q", f.Kind(), f.ID, f.Method)
			}
		})
	}
}

func TestDecodeTooLarge(t *testing.T) {
	b := make([]byte, MaxMessage+1)
	if _, e := Decode(b); e == nil || e.Code != CodeInvalidRequest {
		t.Fatalf("error %v, want -32600", e)
	}
}

func TestDecodeErrorData(t *testing.T) {
	f, e := Decode([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32013,"message":"gap","data":{"reason":"sequence_gap","expected_sequence":5}}}`))
	if e != nil {
		t.Fatal(e)
	}
	d := f.Error.Detail()
	if f.Error.Code != CodeConflict || d.Reason != "sequence_gap" || d.ExpectedSequence == nil || *d.ExpectedSequence != 5 {
		t.Fatalf("got %+v %+v", f.Error, d)
	}
}

func TestBind(t *testing.T) {
	f := &Frame{Method: "executor.heartbeat", ID: json.RawMessage("1")}
	var hp HeartbeatParams
	if e := f.Bind(&hp); e != nil {
		t.Fatalf("absent params: %v", e)
	}
	f.Params = json.RawMessage(`{"active_sessions":"nope"}`)
	e := f.Bind(&hp)
	if e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, "active_sessions") {
		t.Fatalf("got %v", e)
	}
	f.Params = json.RawMessage(`[1]`)
	if e := f.Bind(&hp); e == nil || e.Code != CodeInvalidParams {
		t.Fatalf("array params: %v", e)
	}
}

func TestToolDefAlias(t *testing.T) {
	var caps Capabilities
	in := `{"tools":[{"name":"a","parameters":{"type":"object"}},{"name":"b","description":"d","input_schema":{"x":1},"parameters":{"y":2}},{"name":"c"}]}`
	if err := json.Unmarshal([]byte(in), &caps); err != nil {
		t.Fatal(err)
	}
	got := []string{string(caps.Tools[0].InputSchema), string(caps.Tools[1].InputSchema), string(caps.Tools[2].InputSchema)}
	if diff := cmp.Diff([]string{`{"type":"object"}`, `{"x":1}`, ``}, got); diff != "" {
		t.Fatalf("schemas (-want +got):\n%s", diff)
	}
	out, err := json.Marshal(caps.Tools)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"a","description":null,"input_schema":{"type":"object"}},{"name":"b","description":"d","input_schema":{"x":1}},{"name":"c","description":null,"input_schema":{}}]`
	if string(out) != want {
		t.Fatalf("encoded %s\nwant    %s", out, want)
	}
}

func TestGolden(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	var seq int64 = 12
	frames := map[string]func() ([]byte, error){
		"tool_call": func() ([]byte, error) {
			return EncodeRequest(7, MethodToolCall, ToolCallParams{SessionID: "ses_1", ToolCallID: "toolu_1", Name: "grep", Input: json.RawMessage(`{"pattern":"a<b"}`), TimeoutMS: 30000})
		},
		"assign": func() ([]byte, error) {
			return EncodeRequest(8, MethodSessionAssign, AssignParams{SessionID: "ses_1", Epoch: 3, Metadata: AssignMetadata{Source: SourceHarness, ProfileID: "pro_1"}, Tools: []ToolDef{{Name: "grep"}}})
		},
		"close_notification": func() ([]byte, error) {
			return EncodeNotification(MethodClose, Reason{Reason: "shutdown"})
		},
		"register_result": func() ([]byte, error) {
			return EncodeResult(json.RawMessage(`"r1"`), RegisterResult{ExecutorID: "exe_1", ConnectionID: "exc_1", HeartbeatIntervalMS: 10000, LeaseExpiresAt: at, TokenExpiresAt: at.Add(time.Hour), Sessions: []SessionEpoch{{SessionID: "ses_1", Epoch: 4}}})
		},
		"error_capability_missing": func() ([]byte, error) {
			return EncodeError(json.RawMessage("1"), CapabilityMissing("process", "a machine-scoped executor must declare process or agent")), nil
		},
		"error_conflict_sequence": func() ([]byte, error) {
			return EncodeError(json.RawMessage("2"), Conflict("sequence_gap", "sequence gap", &seq)), nil
		},
		"error_parse": func() ([]byte, error) {
			return EncodeError(nil, Errorf(CodeParseError, "Parse error")), nil
		},
	}
	for name, enc := range frames {
		t.Run(name, func(t *testing.T) {
			got, err := enc()
			if err != nil {
				t.Fatal(err)
			}
			if _, e := Decode(got); e != nil {
				t.Fatalf("encoded frame does not decode: %v", e)
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./executor/proto -update)", err)
			}
			if diff := cmp.Diff(strings.TrimSpace(string(want)), string(got)); diff != "" {
				t.Errorf("frame (-golden +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecode checks that the decoder never panics, that what it accepts
// is valid UTF-8 and survives a round trip through the encoders, and that
// every id it hands back for an error answer is a valid id.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"executor.register","params":{"protocol":"bma.executor.v1.1","environment_id":"env_1","capabilities":{"tools":[{"name":"a","parameters":{}}]}}}`,
		`{"jsonrpc":"2.0","method":"tool.progress","params":{"session_id":"s","tool_call_id":"t","progress":0.5}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"accepted":true}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32012,"message":"m","data":{"reason":"capability_missing","capability":"process"}}}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"m"}`,
		`{"jsonrpc":"2.0","id":-0.5,"method":"m","params":[]}`,
		`{"JSONRPC":"2.0","ID":1,"Method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[[[[[]]]]]}}`,
		`[]`, `null`, ``, `{`, "\x00",
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tool.result\",\"params\":{\"content\":\"hi \xff\xfe\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, e := Decode(b)
		if e != nil {
			if fr != nil && fr.ID != nil && !validID(fr.ID) {
				t.Fatalf("error frame carries invalid id %q", fr.ID)
			}
			if out := EncodeError(nil, e); !json.Valid(out) {
				t.Fatalf("error frame is not JSON: %s", out)
			}
			return
		}
		if !utf8.Valid(b) {
			t.Fatalf("accepted invalid UTF-8: %q", b)
		}
		var out []byte
		var err error
		switch fr.Kind() {
		case KindRequest:
			m := map[string]any{"jsonrpc": "2.0", "id": fr.ID, "method": fr.Method}
			if fr.Params != nil {
				m["params"] = fr.Params
			}
			out, err = json.Marshal(m)
		case KindNotification:
			var params any = fr.Params
			if fr.Params == nil {
				params = nil
			}
			out, err = EncodeNotification(fr.Method, params)
		case KindResponse:
			if fr.Error != nil {
				out = EncodeError(fr.ID, fr.Error)
			} else {
				out, err = EncodeResult(fr.ID, fr.Result)
			}
		default:
			t.Fatalf("unknown kind %d", fr.Kind())
		}
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, e := Decode(out)
		if e != nil {
			t.Fatalf("re-encoded frame %s fails: %v", out, e)
		}
		if again.Kind() != fr.Kind() || again.Method != fr.Method || string(again.ID) != string(fr.ID) {
			t.Fatalf("round trip changed the frame: %s → %s", b, out)
		}
	})
}
