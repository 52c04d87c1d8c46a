package cluster

import (
	"net/http/httptest"
	"testing"
)

// TestServedAnywhere: plain subscriptions and unsubscribes are served by
// the node they reach; everything else, subscriptions that want deltas
// included, goes to the owner.
func TestServedAnywhere(t *testing.T) {
	for _, tc := range []struct {
		method, path, body string
		want               bool
	}{
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`, true},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe","params":{"since_event_id":"evt_1"}}`, true},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe","params":{"stream_deltas":true}}`, false},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.unsubscribe"}`, true},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{}}`, false},
		{"POST", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.registerDriver"}`, false},
		{"POST", "/api/v1/sessions/ses_1/rpc", `not json`, false},
		{"POST", "/api/v1/sessions/ses_1/join", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`, false},
		{"GET", "/api/v1/sessions/ses_1/rpc", `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`, false},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if got := servedAnywhere(r, []byte(tc.body)); got != tc.want {
			t.Errorf("%s %s %s: %v, want %v", tc.method, tc.path, tc.body, got, tc.want)
		}
	}
}
