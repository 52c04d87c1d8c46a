package adminclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNodes: Nodes decodes GET /admin/v1/nodes and keeps the raw body;
// a body without a nodes array is ErrUnexpected, a problem an *APIError.
func TestNodes(t *testing.T) {
	const cluster = `{"cluster":true,"nodes":[{"id":"n1","advertise_url":"http://10.0.0.1:8080","version":"0.9.0",` +
		`"started_at":"2025-03-01T10:00:00.000Z","heartbeat_at":"2025-03-01T11:00:00.000Z","heartbeat_age_ms":1250,` +
		`"draining":true,"sessions":2}]}`
	tests := []struct {
		name    string
		status  int
		body    string
		want    *NodeList
		wantErr error
	}{
		{"cluster", 200, cluster, &NodeList{Cluster: true, Nodes: []Node{{ID: "n1", AdvertiseURL: "http://10.0.0.1:8080",
			Version: "0.9.0", StartedAt: "2025-03-01T10:00:00.000Z", HeartbeatAt: "2025-03-01T11:00:00.000Z",
			HeartbeatAgeMS: 1250, Draining: true, Sessions: 2}}}, nil},
		{"single node", 200, `{"cluster":false,"nodes":[]}`, &NodeList{Nodes: []Node{}}, nil},
		{"no nodes array", 200, `{"cluster":false}`, nil, ErrUnexpected},
		{"null nodes", 200, `{"cluster":true,"nodes":null}`, nil, ErrUnexpected},
		{"not JSON", 200, `<html>`, nil, ErrUnexpected},
		{"problem", 503, `{"type":"unavailable","title":"Service Unavailable","status":503,"detail":"no cluster"}`, nil,
			&APIError{Status: 503, Type: "unavailable", Title: "Service Unavailable", Detail: "no cluster"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != "GET" || r.URL.Path != "/admin/v1/nodes" || r.Header.Get("Authorization") != "Bearer k" {
					t.Errorf("request %s %s, Authorization %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			c, err := New(srv.URL, "k", srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			got, raw, err := c.Nodes(t.Context())
			var ae *APIError
			switch want := tt.wantErr.(type) {
			case nil:
				if err != nil {
					t.Fatal(err)
				}
			case *APIError:
				if !errors.As(err, &ae) || *ae != *want {
					t.Fatalf("err = %#v, want %#v", err, want)
				}
			default:
				if !errors.Is(err, want) {
					t.Fatalf("err = %v, want %v", err, want)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NodeList (-want +got):\n%s", diff)
			}
			if tt.wantErr == nil && string(raw) != tt.body {
				t.Errorf("raw = %s, want the body as sent", raw)
			}
		})
	}
}

func TestNodeHeartbeatAge(t *testing.T) {
	n := Node{HeartbeatAgeMS: 1250}
	if got := n.HeartbeatAge(); got != 1250*time.Millisecond {
		t.Errorf("HeartbeatAge() = %v, want 1.25s", got)
	}
}
