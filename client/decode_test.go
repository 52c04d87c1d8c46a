package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The decoders of scan.go and decode.go must read exactly what
// encoding/json read before them. The references below are the former
// encoding/json code; the tests and fuzzers compare the two.

func refDecodeFrame(line []byte) (*frame, error) {
	line = bytes.TrimSpace(line)
	if line[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	f := new(frame)
	if err := json.Unmarshal(line, f); err != nil {
		return nil, err
	}
	if _, ok := f.kind(); !ok {
		return nil, errors.New("no method, result or error member")
	}
	return f, nil
}

// refEvent decodes as Event.UnmarshalJSON did with encoding/json.
type refEvent struct{ Event }

func (e *refEvent) UnmarshalJSON(b []byte) error {
	var v eventView
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	e.Event = Event{ID: v.ID, SessionID: v.SessionID, Type: v.EventType, Payload: v.Payload}
	if v.ClientKeyID != nil {
		e.ClientKeyID = *v.ClientKeyID
	}
	if t, err := time.Parse(time.RFC3339Nano, v.CreatedAt); err == nil {
		e.CreatedAt = t
	}
	return nil
}

func refDecodeSendResult(raw []byte) (*sendResult, error) {
	var r struct {
		Message Message    `json:"message"`
		Events  []refEvent `json:"events"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	res := &sendResult{Message: r.Message}
	if r.Events != nil {
		res.Events = make([]Event, len(r.Events))
		for i, e := range r.Events {
			res.Events[i] = e.Event
		}
	}
	return res, nil
}

// sameDecoding fails t unless both decodings failed or both succeeded
// with equal values.
func sameDecoding[T any](t *testing.T, in []byte, got T, err error, want T, wantErr error) {
	t.Helper()
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: err = %v, encoding/json's = %v", in, err, wantErr)
	}
	if err != nil {
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q: decoded differently from encoding/json (-json +ours):\n%s", in, diff)
	}
}

// wireFrame is what encoding/json reads of a frame.
type wireFrame struct {
	ID, Params, Result json.RawMessage
	Method             string
	Error              *wireError
}

func wireOf(f *frame) *wireFrame {
	if f == nil {
		return nil
	}
	return &wireFrame{ID: f.ID, Params: f.Params, Result: f.Result, Method: f.Method, Error: f.Error}
}

func checkFrame(t *testing.T, line []byte) {
	t.Helper()
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	want, wantErr := refDecodeFrame(line)
	for _, sendResults := range []bool{false, true} {
		got := new(frame)
		err := decodeFrame(line, got, interner{}, sendResults)
		if err != nil {
			got = nil
		}
		sameDecoding(t, line, wireOf(got), err, wireOf(want), wantErr)
		if err != nil {
			continue
		}
		// What was decoded in the frame's pass is what the params and
		// result decode to on their own.
		if got.hasEvent {
			var ev Event
			evErr := decodeEvent(got.Params, &ev, nil, false)
			sameDecoding(t, got.Params, got.event, got.eventErr, ev, evErr)
		}
		if sendResults && got.Result != nil {
			res, resErr := decodeSendResult(got.Result, nil)
			sameDecoding(t, got.Result, got.send, got.sendErr, res, resErr)
		}
	}
}

func checkEvent(t *testing.T, b []byte) {
	t.Helper()
	var want refEvent
	wantErr := want.UnmarshalJSON(b)
	for _, keep := range []bool{false, true} {
		var got Event
		err := decodeEvent(b, &got, interner{}, keep)
		sameDecoding(t, b, got, err, want.Event, wantErr)
	}
	var got Event // the exported method, as encoding/json calls it
	err := got.UnmarshalJSON(b)
	sameDecoding(t, b, got, err, want.Event, wantErr)
}

func checkSendResult(t *testing.T, raw []byte) {
	t.Helper()
	want, wantErr := refDecodeSendResult(raw)
	got, err := decodeSendResult(raw, interner{})
	sameDecoding(t, raw, got, err, want, wantErr)
}

// valid reports, as json.Valid does, whether b is one JSON value with
// optional space around it.
func valid(b []byte) error {
	d := decoder{b: b}
	d.space()
	if err := d.value(); err != nil {
		return err
	}
	return d.end()
}

func checkValid(t *testing.T, b []byte) {
	t.Helper()
	if err := valid(b); (err == nil) != json.Valid(b) {
		t.Fatalf("%q: valid = %v, json.Valid = %v", b, err, json.Valid(b))
	}
}

var frameCases = []string{
	`{"jsonrpc":"2.0","method":"session.event","params":{"id":"evt_1"}}`,
	`  {"method":"m","params":[1,2,{"a":null}]}  `,
	"\v{\"method\":\"m\"}\f",
	`{"id":7,"result":null}`,
	`{"id":"7","result":{"ended":true}}`,
	`{"id":null,"error":{"code":-32700,"message":"Parse error"}}`,
	`{"error":{"code":-32000,"message":"lagged"}}`,
	`{"error":null,"method":"m"}`,
	`{"error":{"code":1},"error":{"message":"merged"}}`,
	`{"error":{"code":1},"error":null,"result":1}`,
	`{"error":{"code":1.5}}`,
	`{"error":{"code":1e3}}`,
	`{"error":{"code":-0}}`,
	`{"error":{"code":99999999999999999999}}`,
	`{"error":{"code":"1"}}`,
	`{"error":[]}`,
	`{"error":"x"}`,
	`{"method":7}`,
	`{"method":null,"result":1}`,
	`{"METHOD":"m"}`,
	`{"Method":"a","method":"b"}`,
	`{"me\u0074hod":"m"}`,
	`{"ſession":1,"result":2}`,
	`{"method":"m\u00e9\ud800x"}`,
	"{\"method\":\"m\xff\"}",
	"{\"meth\xffod\":\"m\",\"result\":1}",
	`{"method":"m","params":{"deep":[[[[[]]]]]}}`,
	`{"method":"m"} x`,
	`{"method":"m",}`,
	`{"method":"m" "params":1}`,
	`{"method":"m","params":01}`,
	`{"method":"m","params":1.}`,
	`{"method":"m","params":-}`,
	`{"method":"m","params":1e+}`,
	`{"method":"m","params":tru}`,
	`{"method":"m","params":nulll}`,
	`{"method":"m","params":"a\qb"}`,
	`{"method":"m","params":"a\u12G4"}`,
	"{\"method\":\"m\",\"params\":\"a\tb\"}",
	`{"method":"m","params":"unterminated}`,
	`{"id":1}`,
	`{}`,
	`{`,
	`[1]`,
	`null`,
	`{"method":"m","params":{"a":1,"a":2}}`,
	`{"params":{"id":"e"},"method":"session.event"}`,
	`{"method":"session.event","params":{"id":"e1"},"method":"x"}`,
	`{"method":"x","params":{"id":"e1"},"method":"session.event"}`,
	`{"method":"session.event","params":{"id":"e1"},"params":{"id":"e2"}}`,
	`{"method":"session.event","params":{"id":5,"payload":[1,2]}}`,
	`{"method":"session.event","params":{"id":5,"payload":[1,2}}`,
	`{"method":"session.event","params":null}`,
	`{"method":"session.event"}`,
	`{"id":1,"result":{"message":{"role":"assistant","content":"hi"},"events":[{"id":"e","payload":{"a":"b"}}]}}`,
	`{"id":1,"result":{"message":{"role":7},"events":[]}}`,
	`{"id":1,"result":{"message":{"role":7},"events":[}}`,
	`{"id":1,"result":{"events":[{"id":"a"}]},"result":{"events":[{"id":"b"}]}}`,
	`{"id":1,"result":{"events":[{"id":"a"}]},"result":5}`,
	`{"method":"m",` + strings.Repeat(`"x":`, 3) + `1}`,
}

func TestDecodeFrameMatchesEncodingJSON(t *testing.T) {
	for _, c := range frameCases {
		checkFrame(t, []byte(c))
	}
	deep := `{"method":"m","params":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`
	checkFrame(t, []byte(deep)) // at the limit
	deeper := `{"method":"m","params":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`
	checkFrame(t, []byte(deeper)) // one over
	if err := decodeFrame([]byte(deeper), new(frame), interner{}, false); err == nil {
		t.Fatal("nesting over encoding/json's limit accepted")
	}
}

var eventCases = []string{
	`{"id":"evt_1","session_id":"ses_1","client_key_id":"key_1","event_type":"tool.call","payload":{"a":[1,"x"]},"created_at":"2026-07-06T18:26:10.123Z"}`,
	`{"id":"evt_1","client_key_id":null,"payload":null,"created_at":"yesterday"}`,
	`{"client_key_id":"a","client_key_id":null}`,
	`{"client_key_id":null,"client_key_id":"b"}`,
	`{"Event_Type":"x","PAYLOAD":"s","created_at":"2026-07-06T18:26:10+02:00"}`,
	`{"id":5}`,
	`{"client_key_id":5}`,
	`{"payload":{"unterminated":}`,
	`{"id":"a\"b\\c\u0041\n"}`,
	`{"unknown":{"nested":[true,false,null,-1.5e-3]},"id":"x"}`,
	`null`,
	`"evt"`,
	`[]`,
	`7`,
	` {"id":"x"} `,
	`{"id":"x"}{}`,
	``,
}

func TestDecodeEventMatchesEncodingJSON(t *testing.T) {
	for _, c := range eventCases {
		checkEvent(t, []byte(c))
	}
}

var resultCases = []string{
	`{"message":{"role":"assistant","content":[{"type":"text","text":"hi"}]},"events":[{"id":"evt_1","event_type":"x","payload":{}},null]}`,
	`{"message":{"role":"assistant","content":null},"events":[]}`,
	`{"message":null,"events":null}`,
	`{"message":{"role":"a"},"message":{"content":"c"}}`,
	`{"events":[{"id":"1"}],"events":[{"id":"2"},{"id":"3"}]}`,
	`{"events":[{"id":"1"}],"events":[]}`,
	`{"message":"text"}`,
	`{"message":{"role":1}}`,
	`{"events":{}}`,
	`{"events":[1]}`,
	`{"events":[{"id":2}]}`,
	`{"ended":true}`,
	`null`,
	`[]`,
	`"x"`,
	`{"message":{"role":"a"}`,
	` {"message":{}} `,
}

func TestDecodeSendResultMatchesEncodingJSON(t *testing.T) {
	for _, c := range resultCases {
		checkSendResult(t, []byte(c))
	}
	f := sendStreamFixture(4 << 10)
	lines := bytes.Split(bytes.TrimSpace(f), []byte("\n"))
	var fr frame
	if err := decodeFrame(lines[len(lines)-1], &fr, interner{}, false); err != nil {
		t.Fatal(err)
	}
	checkSendResult(t, fr.Result)
	for _, l := range lines {
		checkFrame(t, l)
	}
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, c := range append(append(append([]string(nil), frameCases...), eventCases...), resultCases...) {
		checkValid(t, []byte(c))
	}
	for _, c := range []string{"", " ", "0", "-0", "-", "1.5e10", "1E-2", "01", ".5", "[1,]", "[,1]", `{"a"}`, `{"a":}`, `{1:2}`, `"\u00"`, `"\/"`, " \r\n\t[] \n", "[] []", "\xef\xbb\xbf{}"} {
		checkValid(t, []byte(c))
	}
}

// TestStreamKeepsWhatItReturns reads events, a result and another
// stream through the same conn: whatever a stream returned must survive
// its buffers being reused.
func TestStreamKeepsWhatItReturns(t *testing.T) {
	c := &conn{max: DefaultMaxFrameSize}
	data := sendStreamFixture(4 << 10)
	other := bytes.ReplaceAll(sendStreamFixture(5<<10), []byte("get_time"), []byte("tool_xyz"))
	read := func(data []byte) ([]Event, *sendResult) {
		var notes []Event
		st := newStream(context.Background(), c, "session.sendMessage", io.NopCloser(bytes.NewReader(data)))
		res, err := st.send(func(ev Event) { notes = append(notes, ev) })
		if err != nil {
			t.Fatal(err)
		}
		return notes, res
	}
	notes, res := read(data)
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	last, err := refDecodeFrame(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	want, err := refDecodeSendResult(last.Result)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		read(other) // reuses the released reader's buffers
	}
	if diff := cmp.Diff(want.Events[1:], notes); diff != "" {
		t.Errorf("notified events changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result changed (-want +got):\n%s", diff)
	}
	if len(notes) != 4 || notes[0].Type != "provider.request" || len(notes[0].Payload) < 4<<10 {
		t.Fatalf("notes %+v", notes)
	}
}

func TestInternerIsBounded(t *testing.T) {
	in := interner{}
	a := in.str([]byte("ses_1"))
	if b := in.str([]byte("ses_1")); a != b || len(in) != 1 {
		t.Fatalf("second lookup %q, %d entries", b, len(in))
	}
	for i := range 3 * maxInterned {
		in.str([]byte(strings.Repeat("x", i)))
	}
	if len(in) > maxInterned {
		t.Fatalf("%d strings interned, bound %d", len(in), maxInterned)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	for _, c := range frameCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkFrame(t, line)
		checkValid(t, line)
	})
}

func FuzzDecodeEvent(f *testing.F) {
	for _, c := range eventCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkEvent(t, b)
	})
}

func FuzzDecodeSendResult(f *testing.F) {
	for _, c := range resultCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSendResult(t, b)
	})
}

func checkStamp(t *testing.T, s string) {
	t.Helper()
	lit, _ := json.Marshal(s)
	want, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		want = time.Time{}
	}
	if got := parseStamp(lit); !got.Equal(want) || got.Location().String() != want.Location().String() {
		t.Fatalf("%q: %v, time.Parse gives %v", s, got, want)
	}
}

func TestParseStampMatchesTimeParse(t *testing.T) {
	for _, s := range []string{"2026-07-06T18:26:10.123Z", "2026-02-28T23:59:59.999Z", "2026-02-29T00:00:00.000Z", "2024-02-29T00:00:00.000Z", "1900-02-29T00:00:00.000Z", "2000-02-29T00:00:00.000Z",
		"2026-04-31T00:00:00.000Z", "2026-04-30T00:00:00.000Z", "2026-12-31T23:59:59.999Z", "2026-01-32T00:00:00.000Z",
		"2026-13-01T00:00:00.000Z", "2026-00-01T00:00:00.000Z", "2026-01-31T24:00:00.000Z", "2026-01-01T00:60:00.000Z", "2026-01-01T00:00:60.000Z",
		"0000-01-01T00:00:00.000Z", "2026-07-06T18:26:10Z", "2026-07-06T18:26:10.1234Z", "2026-07-06T18:26:10.123+02:00", "2026-07-06 18:26:10.123Z",
		"2026-07-06T18:26:10.12aZ", "-026-07-06T18:26:10.123Z", ""} {
		checkStamp(t, s)
	}
	if !parseStamp(nil).IsZero() || !parseStamp([]byte(`"2026-07-06T18:26:10.123\u005a"`)).Equal(time.Date(2026, 7, 6, 18, 26, 10, 123e6, time.UTC)) {
		t.Fatal("null or escaped stamp")
	}
}

func FuzzParseStamp(f *testing.F) {
	f.Add("2026-07-06T18:26:10.123Z")
	f.Add("2026-02-30T18:26:10.123Z")
	f.Fuzz(checkStamp)
}
