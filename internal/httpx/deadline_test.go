package httpx

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// openDeadlineServer serves h under a body deadline of d on loopback.
func openDeadlineServer(t *testing.T, d time.Duration, h http.Handler) string {
	t.Helper()
	s := NewServer("127.0.0.1:0", h, nil)
	s.SetBodyTimeout(d)
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return strings.TrimPrefix(s.URL(), "http://")
}

// rawRequest writes head (and the start of a body) on a fresh connection
// and returns the response, which must come within a generous bound.
func rawRequest(t *testing.T, addr, head string) (*http.Response, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// A safety net against a hang, far above the deadline under test.
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("response body: %v", err)
	}
	resp.Body.Close()
	return resp, br
}

const stalledJSON = "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"

// TestBodyDeadlineStalledJSON: a body that stops after one of its 100
// bytes is a 408 once the deadline passes, and the connection closes.
func TestBodyDeadlineStalledJSON(t *testing.T) {
	read := make(chan error, 1)
	addr := openDeadlineServer(t, 200*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := ReadJSON(w, r, 0)
		read <- err
		if rej, ok := err.(*Rejection); ok {
			rej.Write(w)
		}
	}))
	resp, br := rawRequest(t, addr, stalledJSON)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", resp.StatusCode)
	}
	if err := <-read; err == nil {
		t.Error("ReadJSON of a stalled body succeeded")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection after a timed-out body: %v, want EOF", err)
	}
}

// TestBodyDeadlineUnreadBody: a handler that answers without reading a
// stalled body still gets its answer out (net/http discards the rest of
// the body first, under the deadline) and the connection closes.
func TestBodyDeadlineUnreadBody(t *testing.T) {
	addr := openDeadlineServer(t, 200*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	resp, br := rawRequest(t, addr, stalledJSON)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", resp.StatusCode)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection after an unread stalled body: %v, want EOF", err)
	}
}

// TestBodyDeadlineLiftedForStream: once the body is read, a response that
// goes on well past the body deadline keeps its request context (the
// background read must not trip on a leftover deadline) and the
// connection is reused for a second such request.
func TestBodyDeadlineLiftedForStream(t *testing.T) {
	const d = 100 * time.Millisecond
	addr := openDeadlineServer(t, d, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := ReadJSON(w, r, 0); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "start\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-time.After(5 * d): // the behaviour under test is the passing of time
			_, _ = io.WriteString(w, "alive")
		case <-r.Context().Done():
			_, _ = io.WriteString(w, "cancelled")
		}
	}))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i := range 2 {
		resp, err := client.Post("http://"+addr, "application/json", strings.NewReader(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := string(b); got != "start\nalive" {
			t.Errorf("request %d: body %q, want the stream to outlive the body deadline", i, got)
		}
	}
}
