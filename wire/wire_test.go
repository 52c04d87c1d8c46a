package wire

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestParse(t *testing.T) {
	tests := []struct {
		name, body string
		id         string // echoed id ("" = none/null)
		code       int
		msg        string
		method     string
		params     string
	}{
		{"syntax", `{"jsonrpc":`, "", CodeParseError, "Parse error", "", ""},
		// Invalid UTF-8 is a parse error, before the id is read: serde_json
		// refuses the body while parsing it.
		{"invalid utf-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.sendMessage\",\"params\":{\"message\":{\"content\":\"hi \xff\xfe\"}}}", "", CodeParseError, "Parse error", "", ""},
		{"ok utf-8 and a lone surrogate escape", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"日本 \ud800"}}`, "1", 0, "", "m", `{"t":"日本 \ud800"}`},
		{"batch", `[{"jsonrpc":"2.0"}]`, "", CodeInvalidRequest, "Invalid Request: batch requests are not supported", "", ""},
		{"scalar", `42`, "", CodeInvalidRequest, "Invalid Request", "", ""},
		{"bad version", `{"jsonrpc":"1.0","id":7,"method":"x"}`, "7", CodeInvalidRequest, `Invalid Request: missing or wrong "jsonrpc" version`, "", ""},
		{"no method", `{"jsonrpc":"2.0","id":"a"}`, `"a"`, CodeInvalidRequest, `Invalid Request: missing "method"`, "", ""},
		{"method not string", `{"jsonrpc":"2.0","id":1,"method":5}`, "1", CodeInvalidRequest, `Invalid Request: missing "method"`, "", ""},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, "1", CodeInvalidRequest, `Invalid Request: missing "method"`, "", ""},
		{"method null notification", `{"jsonrpc":"2.0","method":null}`, "", CodeInvalidRequest, `Invalid Request: missing "method"`, "", ""},
		{"ok no params", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`, "1", 0, "", "session.subscribe", `{}`},
		{"ok null id is a request", `{"jsonrpc":"2.0","id":null,"method":"m","params":[1]}`, "null", 0, "", "m", `[1]`},
		{"ok notification", ` {"jsonrpc":"2.0","method":"m","params":{"a":1}} `, "", 0, "", "m", `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, e := Parse([]byte(tc.body))
			var id json.RawMessage
			if r != nil {
				id = r.ID
			}
			if string(id) != tc.id {
				t.Errorf("echo id %q, want %q", id, tc.id)
			}
			if tc.code != 0 {
				if e == nil || e.Code != tc.code || e.Message != tc.msg {
					t.Fatalf("error %+v, want %d %q", e, tc.code, tc.msg)
				}
				return
			}
			if e != nil {
				t.Fatalf("unexpected error %+v", e)
			}
			if r == nil {
				t.Fatal("no request")
			}
			if r.Method != tc.method || string(r.Params) != tc.params || r.Notification() != (tc.id == "") {
				t.Fatalf("got %+v notification=%v", r, r.Notification())
			}
		})
	}
}

func TestFromError(t *testing.T) {
	tests := []struct {
		err  error
		code int
		msg  string
	}{
		{baton.Errorf(baton.ECodeNotDriver, "call session.registerDriver before session.sendMessage"), CodeNotDriver, "call session.registerDriver before session.sendMessage"},
		{baton.Errorf(baton.ECodeNotOpen, "session is closed, not open"), CodeServer, "session is closed, not open"},
		{baton.Errorf(baton.ECodeToolNotAllowed, "tool_not_allowed: x"), CodeToolNotAllowed, "tool_not_allowed: x"},
		{baton.Errorf(baton.ECodeInvalidParams, `Invalid params: missing "message"`), CodeInvalidParams, `Invalid params: missing "message"`},
		{baton.Errorf(baton.ECodeLeaseLost, "session ses_1: lease lost"), CodeServer, "session ses_1: lease lost"},
		{baton.Errorf(baton.ECodeUnavailable, "no node could serve session ses_1"), CodeServer, "no node could serve session ses_1"},
		{os.ErrClosed, CodeInternal, "Internal error"},
		{baton.Errorf(baton.ECodeInternal, "db detail"), CodeInternal, "Internal error"},
	}
	for _, tc := range tests {
		e := FromError(tc.err)
		if e.Code != tc.code || e.Message != tc.msg {
			t.Errorf("FromError(%v) = %+v, want %d %q", tc.err, e, tc.code, tc.msg)
		}
	}
}

// TestGoldenFrames pins every frame shape the session loop writes.
func TestGoldenFrames(t *testing.T) {
	ev := &baton.Event{
		ID: "evt_0123456789abcdef0123456789abcdef", SessionID: "ses_0123456789abcdef0123456789abcdef",
		ClientKeyID: "key_0123456789abcdef0123456789abcdef", Type: "client.message.send",
		Payload:   json.RawMessage(`{"role":"user","content":"hi \"there\""}`),
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC),
	}
	anon := *ev
	anon.ClientKeyID = ""
	res, _ := Result(json.RawMessage(`1`), map[string]any{"registered": true})
	note, _ := Notification("session.event", ViewOf(ev))
	delta, _ := DeltaNotification(&baton.Delta{SessionID: ev.SessionID, ClientKeyID: ev.ClientKeyID, Text: "Hel"})
	brainText, _ := DeltaNotification(&baton.Delta{SessionID: ev.SessionID, ClientKeyID: ev.ClientKeyID, Text: "Hel",
		TurnID: "trn_0123456789abcdef0123456789abcdef", EventID: "evt_brain_1"})
	preview, err := DeltaNotification(&baton.Delta{SessionID: ev.SessionID, ClientKeyID: ev.ClientKeyID,
		TurnID: "trn_0123456789abcdef0123456789abcdef", EventID: "toolu_1",
		Preview: json.RawMessage(`{"type":"input_json_delta", "partial_json":"{\"path\":"}`)})
	if err != nil {
		t.Fatal(err)
	}
	frames := map[string][]byte{
		"result":              res,
		"error_null_id":       ErrorFrame(nil, &Error{CodeParseError, "Parse error"}),
		"error_string_id":     ErrorFrame(json.RawMessage(`"abc"`), &Error{CodeNotDriver, "call session.registerDriver before session.sendMessage"}),
		"lagged":              Lagged(),
		"event_notification":  AppendEventNotification(nil, ev),
		"event_no_key":        AppendEventNotification(nil, &anon),
		"event_delta":         delta,
		"event_delta_brain":   brainText,
		"event_delta_preview": preview,
	}
	// The fast encoder must agree with the generic one.
	if !bytes.Equal(frames["event_notification"], note) {
		t.Fatalf("fast notification differs:\n%s\n%s", frames["event_notification"], note)
	}
	for name, got := range frames {
		path := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./wire -update)", err)
		}
		if string(want) != string(got)+"\n" {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"m"}`, `[]`, `{"id":null}`, `"x"`, `{`, `{"jsonrpc":"2.0","method":"m","params":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, e := Parse(body)
		if r == nil && e == nil {
			t.Fatal("neither a request nor an error")
		}
		if e != nil {
			var id json.RawMessage
			if r != nil {
				id = r.ID
			}
			frame := ErrorFrame(id, e)
			if !json.Valid(frame) {
				t.Fatalf("invalid error frame %s", frame)
			}
			return
		}
		if !json.Valid(r.Params) {
			t.Fatalf("params are not JSON: %s", r.Params)
		}
		if r.ID != nil && !json.Valid(r.ID) {
			t.Fatalf("echoed id is not JSON: %s", r.ID)
		}
	})
}

func FuzzEventNotification(f *testing.F) {
	f.Add("evt_1", "ses_1", "key_1", "x.y", `{"a":"\u0000"}`)
	f.Add("e\"v", "s\\", "", "t\n", `[]`)
	f.Fuzz(func(t *testing.T, id, sid, key, typ, payload string) {
		if !json.Valid([]byte(payload)) {
			return
		}
		ev := &baton.Event{ID: id, SessionID: sid, ClientKeyID: key, Type: typ, Payload: json.RawMessage(payload)}
		got := AppendEventNotification(nil, ev)
		want, _ := Notification("session.event", ViewOf(ev))
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
			t.Fatalf("invalid JSON: %s", got)
		}
		if !bytes.Equal(mustMarshal(a), mustMarshal(b)) {
			t.Fatalf("fast %s != generic %s", got, want)
		}
	})
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func BenchmarkEventNotification(b *testing.B) {
	ev := &baton.Event{ID: "evt_0123456789abcdef0123456789abcdef", SessionID: "ses_0123456789abcdef0123456789abcdef",
		ClientKeyID: "key_0123456789abcdef0123456789abcdef", Type: "tool.call",
		Payload: json.RawMessage(`{"id":"toolu_1","name":"get_time","input":{},"dispatch":"client"}`), CreatedAt: time.Now()}
	b.ReportAllocs()
	buf := make([]byte, 0, 512)
	for i := 0; i < b.N; i++ {
		buf = AppendEventNotification(buf[:0], ev)
	}
}

// TestTurnResultMatchesGeneric: the fast terminal frame of sendMessage
// equals the one encoding/json would build.
func TestTurnResultMatchesGeneric(t *testing.T) {
	evs := []*baton.Event{
		{ID: "evt_1", SessionID: "ses_1", ClientKeyID: "key_1", Type: "client.message.send", Payload: json.RawMessage(`{"role":"user","content":"a\u003cb"}`), CreatedAt: time.Unix(5, 0)},
		{ID: "evt_2", SessionID: "ses_1", Type: "server.message.send", Payload: json.RawMessage(`{"content":[]}`), CreatedAt: time.Unix(6, 0)},
	}
	msg := baton.Message{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"hi"}]`)}
	fast := AppendTurnResult(nil, json.RawMessage(`7`), msg, evs)
	slow, _ := Result(json.RawMessage(`7`), struct {
		Message baton.Message `json:"message"`
		Events  []EventView   `json:"events"`
	}{msg, Views(evs)})
	var a, b any
	if err := json.Unmarshal(fast, &a); err != nil {
		t.Fatalf("fast frame is not JSON: %v\n%s", err, fast)
	}
	json.Unmarshal(slow, &b)
	if !bytes.Equal(mustMarshal(a), mustMarshal(b)) {
		t.Fatalf("fast %s\nslow %s", fast, slow)
	}
	if got := AppendTurnResult(nil, nil, msg, nil); !json.Valid(got) || !bytes.Contains(got, []byte(`"id":null`)) || !bytes.Contains(got, []byte(`"events":[]`)) {
		t.Fatalf("empty result: %s", got)
	}
}

// TestEventPageMatchesGeneric: the appended events page equals the one
// encoding/json would build, with and without a next cursor.
func TestEventPageMatchesGeneric(t *testing.T) {
	evs := []*baton.Event{
		{ID: "evt_1", SessionID: "ses_1", ClientKeyID: "key_1", Type: "session.open", Payload: json.RawMessage(`{"tools":["a&b"]}`), CreatedAt: time.Unix(5, 0)},
		{ID: "evt_2", SessionID: "ses_1", Type: "session.close", Payload: json.RawMessage(`{"reason":"client_close"}`), CreatedAt: time.Unix(6, 0)},
	}
	type page struct {
		Items      []EventView `json:"items"`
		NextCursor *string     `json:"next_cursor"`
	}
	next := "2"
	for _, tc := range []struct {
		next string
		want page
	}{{"", page{Views(evs), nil}}, {next, page{Views(evs), &next}}, {"", page{[]EventView{}, nil}}} {
		items := evs
		if len(tc.want.Items) == 0 {
			items = nil
		}
		got := AppendEventPage(nil, items, tc.next)
		want := baton.MarshalJSON(tc.want)
		if string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// The reference encoding the appenders are checked against.

// EventView is an event as encoding/json would render it.
type EventView struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	ClientKeyID *string         `json:"client_key_id"`
	EventType   string          `json:"event_type"`
	Payload     json.RawMessage `json:"payload"`
	CreatedAt   string          `json:"created_at"`
}

// ViewOf renders ev.
func ViewOf(ev *baton.Event) EventView {
	v := EventView{
		ID: ev.ID, SessionID: ev.SessionID, EventType: ev.Type,
		Payload: ev.Payload, CreatedAt: baton.FormatTime(ev.CreatedAt),
	}
	if ev.ClientKeyID != "" {
		k := ev.ClientKeyID
		v.ClientKeyID = &k
	}
	if len(v.Payload) == 0 {
		v.Payload = json.RawMessage("{}")
	}
	return v
}

// Views renders events.
func Views(evs []*baton.Event) []EventView {
	out := make([]EventView, len(evs))
	for i, ev := range evs {
		out[i] = ViewOf(ev)
	}
	return out
}

// TestFramesStayOnOneLine: a payload or message content holding line
// breaks between its tokens is compacted, so the frame is one NDJSON line.
func TestFramesStayOnOneLine(t *testing.T) {
	pretty := json.RawMessage("[\n  {\"type\": \"text\",\r\n   \"text\": \"a\\nb\"}\n]")
	ev := &baton.Event{ID: "evt_1", SessionID: "ses_1", Type: "client.message.send", Payload: pretty}
	for name, frame := range map[string][]byte{
		"notification": AppendEventNotification(nil, ev),
		"result":       AppendTurnResult(nil, json.RawMessage(`1`), baton.Message{Role: "assistant", Content: pretty}, []*baton.Event{ev}),
	} {
		if bytes.ContainsAny(frame, "\r\n") {
			t.Errorf("%s spans lines: %q", name, frame)
		}
		if !json.Valid(frame) || !bytes.Contains(frame, []byte(`[{"type":"text","text":"a\nb"}]`)) {
			t.Errorf("%s does not carry the compacted value: %s", name, frame)
		}
	}
	plain := json.RawMessage(`{"a": 1}`) // spaces alone are kept as they are
	if got := AppendEventView(nil, &baton.Event{Payload: plain}); !bytes.Contains(got, plain) {
		t.Errorf("a value without line breaks was rewritten: %s", got)
	}
}

// refParse and refParam are Parse and Param as they were written on
// encoding/json, made strict about UTF-8 as serde_json is: the
// specification the raw walkers must match.
func refParse(body []byte) (*Request, *Error) {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) || !utf8.Valid(body) {
		return nil, &Error{CodeParseError, "Parse error"}
	}
	switch body[0] {
	case '[':
		return nil, &Error{CodeInvalidRequest, "Invalid Request: batch requests are not supported"}
	case '{':
	default:
		return nil, &Error{CodeInvalidRequest, "Invalid Request"}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &Error{CodeInvalidRequest, "Invalid Request"}
	}
	r := &Request{Params: json.RawMessage(`{}`)}
	if id, ok := m["id"]; ok {
		r.ID = id
	}
	var version string
	if json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" {
		return r, &Error{CodeInvalidRequest, `Invalid Request: missing or wrong "jsonrpc" version`}
	}
	// A JSON string, as serde's as_str: json.Unmarshal would also take
	// null (leaving "") into a string.
	var method *string
	if json.Unmarshal(m["method"], &method) != nil || method == nil {
		return r, &Error{CodeInvalidRequest, `Invalid Request: missing "method"`}
	}
	r.Method = *method
	if p, ok := m["params"]; ok {
		r.Params = p
	}
	return r, nil
}

func refParam(params json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return nil
	}
	return m[key]
}

// FuzzParseMatchesEncodingJSON checks Parse and Param against their
// encoding/json reference on arbitrary bodies.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{"message":{"role":"user","content":"hi"},"stream_deltas":true}}`,
		`{"jsonrpc":"2.0","method":"session.subscribe"}`,
		`{"jsonrpc":"2.0","id":"a","method":null,"params":null}`,
		`{"jsonrpc":"2\u002e0","id":null,"m\u0065thod":"x","method":"y","params":[1,2]}`,
		`{"jsonrpc":2.0,"method":"m"}`, `{"method":5,"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","method":"m","params":{"message":1,"message":2}}`,
		` {"jsonrpc" : "2.0" , "id" : [1] , "method" : "m" , "params" : { "stream_deltas" : false } } `,
		"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"mess\xffage\":1,\"message\\ud800\":2}}",
		`[]`, `"x"`, `{`, `{"id":null}`, ``,
	} {
		f.Add([]byte(s), "message")
	}
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		r, e := Parse(body)
		wr, we := refParse(body)
		if diff := cmp.Diff(we, e); diff != "" {
			t.Fatalf("error (-want +got):\n%s", diff)
		}
		if (r == nil) != (wr == nil) {
			t.Fatalf("request %+v, want %+v", r, wr)
		}
		if r == nil {
			return
		}
		if r.Method != wr.Method || !bytes.Equal(r.ID, wr.ID) || (r.ID == nil) != (wr.ID == nil) || !bytes.Equal(r.Params, wr.Params) {
			t.Fatalf("request %q %s %s, want %q %s %s", r.Method, r.ID, r.Params, wr.Method, wr.ID, wr.Params)
		}
		for _, k := range []string{key, "message", "stream_deltas", "tools"} {
			got, want := Param(r.Params, k), refParam(r.Params, k)
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("Param(%s, %q) = %s, want %s", r.Params, k, got, want)
			}
		}
	})
}
