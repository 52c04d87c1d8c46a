package proto

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeLooseTolerances pins where the executor's decoder accepts
// what the harness's refuses, and that both refuse the rest alike.
func TestDecodeLooseTolerances(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		loose Kind // 0: rejected
		code  int  // DecodeLoose's answer when rejected
		id    string
	}{
		{name: "null id request is a notification", in: `{"jsonrpc":"2.0","id":null,"method":"m"}`, loose: KindNotification},
		{name: "null params", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, loose: KindRequest},
		{name: "long id", in: `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 300) + `","method":"m"}`, loose: KindRequest},
		{name: "long method", in: `{"jsonrpc":"2.0","id":4,"method":"` + strings.Repeat("m", 200) + `"}`, loose: KindRequest},
		{name: "invalid utf-8", in: "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"text\":\"\xff\"}}", loose: KindResponse},
		{name: "null error beside a result", in: `{"jsonrpc":"2.0","id":1,"result":1,"error":null}`, loose: KindResponse},
		{name: "not JSON", in: `{"jsonrpc":`, code: CodeParseError},
		{name: "bad version", in: `{"jsonrpc":"1.0","id":3,"method":"m"}`, code: CodeInvalidRequest, id: "3"},
		{name: "scalar params", in: `{"jsonrpc":"2.0","id":"a","method":"m","params":3}`, code: CodeInvalidRequest, id: `"a"`},
		{name: "response with neither", in: `{"jsonrpc":"2.0","id":6}`, code: CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, e := DecodeLoose([]byte(tc.in))
			if tc.loose != 0 {
				if e != nil || f.Kind() != tc.loose {
					t.Fatalf("DecodeLoose: %+v, %v; want kind %d", f, e, tc.loose)
				}
				if _, se := Decode([]byte(tc.in)); se == nil {
					t.Fatal("Decode accepts it too: not a tolerance")
				}
				return
			}
			if e == nil || e.Code != tc.code || !strings.HasPrefix(e.Message, "malformed frame: ") {
				t.Fatalf("DecodeLoose error %v, want %d", e, tc.code)
			}
			var id string
			if f != nil {
				id = string(f.ID)
			}
			if id != tc.id {
				t.Errorf("answer id %q, want %q", id, tc.id)
			}
			if _, se := Decode([]byte(tc.in)); se == nil {
				t.Error("Decode accepts what DecodeLoose refuses")
			}
		})
	}
}

// FuzzDecodeLooseAcceptsDecode checks that the executor's decoder is the
// more tolerant one: every frame the harness's accepts, it accepts as the
// same frame (a null id aside, which it drops).
func FuzzDecodeLooseAcceptsDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tool.call","params":{"a":"<b>"}}`,
		`{"jsonrpc":"2.0","method":"executor.close","params":{}}`,
		`{"jsonrpc":"2.0","id":"x","result":null}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":null}}`,
		`{"JSONRPC":"2.0","ID":1,"Method":"m","Params":[]}`,
		` {"jsonrpc":"2.0","id":-1.5e3,"error":{"code":1,"message":"m","data":{"reason":"r"}}} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		strict, e := Decode(b)
		if e != nil {
			return
		}
		loose, le := DecodeLoose(b)
		if le != nil {
			t.Fatalf("DecodeLoose refuses what Decode accepts: %q: %v", b, le)
		}
		id := strict.ID
		if string(id) == "null" {
			id = nil
		}
		if loose.Kind() != strict.Kind() || loose.Method != strict.Method || !bytes.Equal(loose.ID, id) ||
			!bytes.Equal(loose.Params, strict.Params) || !bytes.Equal(loose.Result, strict.Result) {
			t.Fatalf("frames differ for %q:\nloose  %+v\nstrict %+v", b, loose, strict)
		}
		if (loose.Error == nil) != (strict.Error == nil) {
			t.Fatalf("error members differ for %q", b)
		}
		if loose.Error != nil {
			data := loose.Error.Data
			if string(data) == "null" {
				data = nil
			}
			if loose.Error.Code != strict.Error.Code || loose.Error.Message != strict.Error.Message || !bytes.Equal(data, strict.Error.Data) {
				t.Fatalf("errors differ for %q: %+v vs %+v", b, loose.Error, strict.Error)
			}
		}
	})
}

func TestEncodeCall(t *testing.T) {
	if got := string(EncodeCall(12, MethodHeartbeat, json.RawMessage(`{"active_sessions":["s"]}`))); got != `{"jsonrpc":"2.0","id":12,"method":"executor.heartbeat","params":{"active_sessions":["s"]}}` {
		t.Errorf("request %s", got)
	}
	if got := string(EncodeCall(0, MethodToolProgress, json.RawMessage(`{}`))); got != `{"jsonrpc":"2.0","method":"tool.progress","params":{}}` {
		t.Errorf("notification %s", got)
	}
}
