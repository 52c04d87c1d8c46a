package peer

import (
	"encoding/json"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
	"github.com/baton-engine/baton/wire"
)

// TestEncodersMatchServer pins proto's standard-library encoders to the
// writers the harness used before proto had to stand alone: results and
// notifications as the client API's (package wire), requests and errors
// as baton.EncodeJSON writes them, HTML escaping included or not.
func TestEncodersMatchServer(t *testing.T) {
	values := []any{
		nil,
		map[string]string{"text": "a<b && c>d \u2028 é"},
		proto.Accepted{Accepted: true},
		json.RawMessage(`{"html":"<x>","n":[1, 2]}`),
		[]proto.ToolDef{{Name: "t&t"}},
	}
	ids := []json.RawMessage{nil, json.RawMessage(`7`), json.RawMessage(`"r<1>"`)}
	for _, v := range values {
		got, err := proto.EncodeNotification("tool.progress", v)
		params := v
		if params == nil {
			params = struct{}{}
		}
		want, werr := wire.Notification("tool.progress", params)
		if err != nil || werr != nil || string(got) != string(want) {
			t.Errorf("notification %v: %s, %v; wire %s, %v", v, got, err, want, werr)
		}
		for _, id := range ids {
			got, err := proto.EncodeResult(id, v)
			want, werr := wire.Result(id, v)
			if err != nil || werr != nil || string(got) != string(want) {
				t.Errorf("result %s %v: %s, %v; wire %s, %v", id, v, got, err, want, werr)
			}
		}
		got, err = proto.EncodeRequest(3, "tool.call", v)
		want, werr = baton.EncodeJSON(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  any             `json:"params,omitempty"`
		}{"2.0", json.RawMessage("3"), "tool.call", v})
		if err != nil || werr != nil || string(got) != string(want) {
			t.Errorf("request %v: %s, %v; want %s, %v", v, got, err, want, werr)
		}
	}
	for _, id := range ids {
		e := proto.Errorf(proto.CodeConflict, "a<b & c").WithData(proto.ErrorData{Reason: "x>y"})
		nid := id
		if nid == nil {
			nid = json.RawMessage("null")
		}
		want, err := baton.EncodeJSON(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *proto.Error    `json:"error"`
		}{"2.0", nid, e})
		if got := proto.EncodeError(id, e); err != nil || string(got) != string(want) {
			t.Errorf("error %s: %s; want %s, %v", id, got, want, err)
		}
	}
}
