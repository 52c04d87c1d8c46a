package executor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

var frameSeeds = []string{
	`{"jsonrpc":"2.0","id":"h-1","method":"tool.call","params":{"session_id":"s","tool_call_id":"c","name":"echo","input":{}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"executor.drain","params":{}}`,
	`{"jsonrpc":"2.0","method":"executor.close","params":{"reason":"bye"}}`,
	`{"jsonrpc":"2.0","id":3,"result":{"executor_id":"exr_1","heartbeat_interval_ms":10000}}`,
	`{"jsonrpc":"2.0","id":4,"error":{"code":-32013,"message":"conflict","data":{"expected_sequence":3}}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
	`{"jsonrpc":"2.0","id":5,"method":"x","params":[1]}`,
	` {"jsonrpc":"2.0","method":"n"} `,
	`{"jsonrpc":"1.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":1}`,
	`{"jsonrpc":"2.0","id":{},"result":1}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","result":1}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":"s"}`,
	`{"jsonrpc":"2.0","id":null,"result":1}`,
	`[{"jsonrpc":"2.0"}]`,
	`null`,
	``,
	`{"jsonrpc":"2.0","id":1,"result":`,
}

func TestDecodeFrame(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind proto.Kind
		ok   bool
	}{
		{frameSeeds[0], proto.KindRequest, true},
		{frameSeeds[1], proto.KindRequest, true},
		{frameSeeds[2], proto.KindNotification, true},
		{frameSeeds[3], proto.KindResponse, true},
		{frameSeeds[4], proto.KindResponse, true},
		{frameSeeds[5], proto.KindResponse, true},
		{frameSeeds[6], proto.KindRequest, true},
		{frameSeeds[7], proto.KindNotification, true},
		{frameSeeds[8], 0, false},
		{frameSeeds[9], 0, false},
		{frameSeeds[10], 0, false},
		{frameSeeds[11], 0, false},
		{frameSeeds[12], 0, false},
		{frameSeeds[13], 0, false},
		{frameSeeds[14], 0, false},
		{frameSeeds[15], 0, false},
		{frameSeeds[16], 0, false},
		{frameSeeds[17], 0, false},
		{frameSeeds[18], 0, false},
	} {
		f, e := proto.DecodeLoose([]byte(tc.in))
		if tc.ok != (e == nil) {
			t.Errorf("DecodeLoose(%s) err = %v, want ok=%v", tc.in, e, tc.ok)
			continue
		}
		if e != nil {
			if !malformed(e) {
				t.Errorf("DecodeLoose(%s) error %v is not a malformed-frame answer", tc.in, e)
			}
			continue
		}
		if f.Kind() != tc.kind {
			t.Errorf("DecodeLoose(%s) kind %d, want %d", tc.in, f.Kind(), tc.kind)
		}
	}
	f, _ := proto.DecodeLoose([]byte(frameSeeds[4]))
	if id, ok := numericID(f); !ok || id != 4 || f.Error.Code != CodeConflict || string(f.Error.Data) != `{"expected_sequence":3}` {
		t.Errorf("error frame decoded as %+v", f)
	}
	f, _ = proto.DecodeLoose([]byte(frameSeeds[0]))
	if _, ok := numericID(f); ok {
		t.Error("a string id counted as one of ours")
	}
}

// malformed reports whether e is DecodeLoose's answer to a message that
// is not a frame: -32700 or -32600 and a "malformed frame" message.
func malformed(e *proto.Error) bool {
	return (e.Code == CodeParseError || e.Code == CodeInvalidRequest) && strings.HasPrefix(e.Message, "malformed frame: ")
}

// isID reports whether id is a JSON string or number.
func isID(id json.RawMessage) bool {
	return len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9'))
}

func TestEncode(t *testing.T) {
	b, err := encodeRequest(12, "executor.heartbeat", proto.HeartbeatParams{ActiveSessions: []string{"s"}})
	if err != nil || string(b) != `{"jsonrpc":"2.0","id":12,"method":"executor.heartbeat","params":{"active_sessions":["s"]}}` {
		t.Errorf("request = %s, %v", b, err)
	}
	b, _ = encodeRequest(0, "tool.progress", map[string]string{})
	if string(b) != `{"jsonrpc":"2.0","method":"tool.progress","params":{}}` {
		t.Errorf("notification = %s", b)
	}
	b, _ = encodeResponse(json.RawMessage(`"h-1"`), proto.Accepted{Accepted: true}, nil)
	if string(b) != `{"jsonrpc":"2.0","id":"h-1","result":{"accepted":true}}` {
		t.Errorf("response = %s", b)
	}
	b, _ = encodeResponse(nil, nil, rpcErr(CodeParseError, "bad", nil))
	if string(b) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}` {
		t.Errorf("error response = %s", b)
	}
	for _, s := range []string{string(b), `{"jsonrpc":"2.0","id":12,"method":"m","params":{}}`} {
		if _, e := proto.DecodeLoose([]byte(s)); e != nil {
			t.Errorf("own frame %s rejected: %v", s, e)
		}
	}
}

func TestToolDefJSON(t *testing.T) {
	var d ToolDef
	if err := json.Unmarshal([]byte(`{"name":"a","parameters":{"type":"object"}}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "a" || string(d.InputSchema) != `{"type":"object"}` {
		t.Errorf("parameters alias: %+v", d)
	}
	b, _ := json.Marshal(ToolDef{Name: "b"})
	if string(b) != `{"name":"b","input_schema":{"type":"object","properties":{}}}` {
		t.Errorf("empty schema = %s", b)
	}
}

func TestHTTPError(t *testing.T) {
	e := httpError("token exchange", 401, []byte(`{"error":{"code":"unauthorized","message":"invalid credential"}}`))
	want := &HTTPError{Op: "token exchange", Status: 401, Code: "unauthorized", Message: "invalid credential"}
	if d := cmp.Diff(want, e); d != "" {
		t.Errorf("envelope (-want +got):\n%s", d)
	}
	if !e.permanent() || httpError("x", 503, nil).permanent() {
		t.Error("permanent: 401 must be, 503 must not")
	}
	if e := httpError("connect", 400, []byte("no acceptable subprotocol\n")); e.Message != "no acceptable subprotocol" {
		t.Errorf("plain body: %+v", e)
	}
}

// FuzzDecodeFrame feeds arbitrary messages to the decoder of incoming
// frames: it must never panic, and what it accepts must be a well-formed
// request, notification or response.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, e := proto.DecodeLoose(b)
		if e != nil {
			if !malformed(e) {
				t.Fatalf("error %v is not a malformed-frame answer", e)
			}
			if fr != nil && !isID(fr.ID) {
				t.Fatalf("the answer to %q goes to id %q", b, fr.ID)
			}
			return
		}
		switch fr.Kind() {
		case proto.KindRequest:
			if fr.Result != nil || fr.Error != nil || !isID(fr.ID) {
				t.Fatalf("request %+v", fr)
			}
		case proto.KindNotification:
			if fr.ID != nil || fr.Result != nil || fr.Error != nil {
				t.Fatalf("notification %+v", fr)
			}
		case proto.KindResponse:
			if (fr.Result == nil) == (fr.Error == nil) {
				t.Fatalf("response needs exactly one of result and error: %+v", fr)
			}
			if fr.ID == nil && fr.Error == nil {
				t.Fatalf("result without id: %+v", fr)
			}
		default:
			t.Fatalf("unknown kind %d", fr.Kind())
		}
		// Whatever was accepted re-encodes and decodes to the same kind.
		m := map[string]any{"jsonrpc": "2.0"}
		for k, v := range map[string]json.RawMessage{"id": fr.ID, "params": fr.Params, "result": fr.Result} {
			if v != nil {
				m[k] = v
			}
		}
		if fr.Method != "" {
			m["method"] = fr.Method
		}
		if fr.Error != nil {
			m["error"] = fr.Error
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", fr, err)
		}
		fr2, e := proto.DecodeLoose(again)
		if e != nil || fr2.Kind() != fr.Kind() || fr2.Method != fr.Method {
			t.Fatalf("re-decode of %s: %+v, %v", again, fr2, e)
		}
	})
}
