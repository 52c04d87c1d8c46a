package cluster

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
)

func TestCallRequestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{0, 0},
		{time.Nanosecond, time.Millisecond}, // rounded up: a timeout never becomes none
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{90 * time.Second, 90 * time.Second},
	} {
		c := baton.ExecutorCall{SessionID: "ses_1", ProfileID: "pro_1", EnvironmentID: "env_a", ToolCallID: "call_1",
			Name: "lookup", Input: json.RawMessage(`{"q":1}`), Timeout: tc.timeout}
		b, err := baton.EncodeJSON(newCallRequest(c))
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeCallRequest(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, callPath, bytes.NewReader(b)))
		if err != nil {
			t.Fatal(err)
		}
		c.Timeout = tc.want
		if diff := cmp.Diff(c, got.call()); diff != "" {
			t.Errorf("timeout %s (-want +got):\n%s", tc.timeout, diff)
		}
	}
}

// FuzzCallRequest checks the decoder of the call endpoint's body: it
// never panics, and a body it takes is a complete call that encodes and
// decodes to itself.
func FuzzCallRequest(f *testing.F) {
	f.Add([]byte(`{"session_id":"ses_1","environment_id":"env_a","tool_call_id":"call_1","name":"lookup","input":{"q":1},"timeout_ms":5}`))
	f.Add([]byte(`{"session_id":"ses_1"}`))
	f.Add([]byte(`{"session_id":"ses_1","environment_id":"e","tool_call_id":"c","name":"n","timeout_ms":-1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"input":`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeCallRequest(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, callPath, bytes.NewReader(body)))
		if err != nil {
			if code := baton.ErrorCode(err); code != baton.ECodeBadRequest && code != baton.ECodePayloadTooLarge {
				t.Fatalf("error %v: want bad_request", err)
			}
			return
		}
		if err := req.check(); err != nil {
			t.Fatalf("took a request that fails its check: %v", err)
		}
		b, err := baton.EncodeJSON(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeCallRequest(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, callPath, bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("re-encoded %s: %v", b, err)
		}
		if !cmp.Equal(normal(req), normal(again)) {
			t.Fatalf("round trip of %s: %+v became %+v", b, req, again)
		}
	})
}

// normal compacts a request's input, which its encoding compacts.
func normal(r callRequest) callRequest {
	var buf bytes.Buffer
	if len(r.Input) > 0 && json.Compact(&buf, r.Input) == nil {
		r.Input = buf.Bytes()
	}
	return r
}
