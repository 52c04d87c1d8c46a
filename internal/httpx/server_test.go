package httpx

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	release := make(chan struct{})
	started := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	s := NewServer("127.0.0.1:0", Routes(mux), nil)
	if s.URL() != "" {
		t.Errorf("URL before Open = %q", s.URL())
	}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background()); err == nil {
		t.Error("second Open succeeded")
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL = %q", s.URL())
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	// Shutdown waits for the request in flight.
	body := make(chan string)
	go func() {
		resp, err := client.Get(s.URL() + "/slow")
		if err != nil {
			body <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body <- string(b)
	}()
	<-started
	shut := make(chan error)
	go func() { shut <- s.Shutdown(context.Background()) }()
	close(release)
	if got := <-body; got != "done" {
		t.Errorf("in-flight request got %q", got)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := client.Get(s.URL() + "/slow"); err == nil {
		t.Error("request after Shutdown succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after Shutdown: %v", err)
	}
}

func TestServerOpenError(t *testing.T) {
	s := NewServer("127.0.0.1:notaport", http.NotFoundHandler(), nil)
	if err := s.Open(context.Background()); err == nil {
		t.Fatal("Open on a bad address succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close of an unopened server: %v", err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of an unopened server: %v", err)
	}
}
