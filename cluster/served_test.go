package cluster

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestKindOf: plain subscriptions and unsubscribes are served by the
// node they reach; subscriptions and calls streams are long-lived;
// everything else, subscriptions that want deltas included, goes to the
// owner as a plain request.
func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		method, path, body string
		want               kind
	}{
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`, kind{anywhere: true, stream: true}},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe","params":{"since_event_id":"evt_1"}}`, kind{anywhere: true, stream: true}},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe","params":{"stream_deltas":true}}`, kind{stream: true}},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.unsubscribe"}`, kind{anywhere: true}},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{}}`, kind{}},
		// A message that merely mentions the method is not a subscription.
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{"message":{"content":"\"session.subscribe\""}}}`, kind{}},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.registerDriver"}`, kind{}},
		{"POST", "/api/v1/sessions/ses_1/rpc", `not json "session.subscribe"`, kind{}},
		{"POST", "/api/v1/sessions/ses_1/join", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`, kind{}},
		{"GET", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`, kind{}},
		{"GET", "/v1/sessions/ses_1/clients/cli_1/calls", ``, kind{stream: true}},
		{"POST", "/v1/sessions/ses_1/clients/cli_1/calls/c1/result", `{}`, kind{}},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(""))
		if got := kindOf(r, []byte(tc.body)); got != tc.want {
			t.Errorf("%s %s %s: %+v, want %+v", tc.method, tc.path, tc.body, got, tc.want)
		}
	}
}
