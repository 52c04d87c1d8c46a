package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	exsdk "github.com/baton-engine/baton/client/executor"
)

// Fixtures of the executor end-to-end tests: executors built with the
// real SDK (client/executor) reach the server over real WebSockets
// through execNet, a network the test controls.

// execNet is the executors' network: every dial goes to the server
// address the test sets (so a restarted server on a new port is the same
// "host"), and each connection can be cut, or frozen so that nothing
// passes in either direction. It records what executors read, to check
// which harness requests reached them.
type execNet struct {
	mu      sync.Mutex
	addr    string
	refuse  bool
	frozen  bool
	dials   int
	conns   []*execConn   // open
	history []*execConn   // every connection dialled
	changed chan struct{} // closed and replaced on every dial and read
}

func newExecNet(t testing.TB, s *server) *execNet {
	n := &execNet{addr: strings.TrimPrefix(s.clientURL, "http://"), changed: make(chan struct{})}
	t.Cleanup(n.cut) // before the executors' Close: nothing waits on a frozen link
	return n
}

// execBase is the origin executors are configured with; execNet maps it
// to the current server.
const execBase = "http://baton.test"

func (n *execNet) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: n.dial, DisableKeepAlives: true}}
}

func (n *execNet) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	n.mu.Lock()
	addr, refuse := n.addr, n.refuse
	n.mu.Unlock()
	if refuse {
		return nil, errors.New("execNet: unreachable")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	ec := &execConn{Conn: c, net: n, closed: make(chan struct{})}
	n.mu.Lock()
	n.dials++
	n.conns = append(n.conns, ec)
	n.history = append(n.history, ec)
	n.notifyLocked()
	n.mu.Unlock()
	return ec, nil
}

func (n *execNet) notifyLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// point sends later dials to the server s.
func (n *execNet) point(s *server) {
	n.mu.Lock()
	n.addr = strings.TrimPrefix(s.clientURL, "http://")
	n.mu.Unlock()
}

// setRefuse makes new dials fail (or work again).
func (n *execNet) setRefuse(v bool) {
	n.mu.Lock()
	n.refuse = v
	n.mu.Unlock()
}

// kill cuts every open connection, as a crashed process or a dead link.
func (n *execNet) kill() {
	n.mu.Lock()
	conns := n.conns
	n.conns = nil
	n.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (n *execNet) isFrozen() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.frozen
}

// freeze stops all traffic on the open connections (writes vanish,
// reads never return) and refuses new dials: to the server, the executor
// has gone silent.
func (n *execNet) freeze() {
	n.mu.Lock()
	n.refuse, n.frozen = true, true
	for _, c := range n.conns {
		c.mu.Lock()
		c.frozen = true
		c.mu.Unlock()
	}
	n.mu.Unlock()
}

// cut refuses dials and closes every connection.
func (n *execNet) cut() {
	n.setRefuse(true)
	n.kill()
}

func (n *execNet) dialCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dials
}

// read returns everything executors have read so far.
func (n *execNet) read() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for _, c := range n.history {
		c.mu.Lock()
		b.Write(c.in.Bytes())
		c.mu.Unlock()
	}
	return b.String()
}

// waitFor waits until cond holds, re-checking on every dial and read.
func (n *execNet) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(loopWait)
	for {
		n.mu.Lock()
		ch := n.changed
		n.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// execConn is one executor connection of an execNet.
type execConn struct {
	net.Conn
	net    *execNet
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	frozen bool
	in     bytes.Buffer // what the executor read
}

func (c *execConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	frozen := c.frozen
	c.mu.Unlock()
	if frozen {
		<-c.closed
		return 0, net.ErrClosed
	}
	k, err := c.Conn.Read(p)
	if k > 0 {
		c.mu.Lock()
		c.in.Write(p[:k])
		c.mu.Unlock()
		c.net.mu.Lock()
		c.net.notifyLocked()
		c.net.mu.Unlock()
	}
	return k, err
}

func (c *execConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	frozen := c.frozen
	c.mu.Unlock()
	if frozen {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *execConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// startExecutor opens an SDK executor on n; Close runs at cleanup.
func startSDKExecutor(t testing.TB, n *execNet, cfg exsdk.Config) *exsdk.Executor {
	t.Helper()
	cfg.BaseURL, cfg.HTTPClient = execBase, n.client()
	cfg.ReconnectMin, cfg.ReconnectMax = 5*time.Millisecond, 50*time.Millisecond
	e, err := exsdk.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), loopWait)
	defer cancel()
	if err := e.Open(ctx); err != nil {
		t.Fatalf("executor open: %v", err)
	}
	t.Cleanup(func() {
		if n.isFrozen() {
			n.cut() // nothing would answer the close handshake
		}
		ctx, cancel := context.WithTimeout(context.Background(), loopWait)
		defer cancel()
		_ = e.Close(ctx)
	})
	return e
}

// environment creates an environment with a credential and returns
// (environment id, credential secret, credential id).
func (s *server) environment(name string) (string, string, string) {
	s.t.Helper()
	r := s.admin("POST", "/admin/v1/environments", map[string]any{"name": name})
	mustStatus(s.t, r, 201)
	id := r.json(s.t)["id"].(string)
	r = s.admin("POST", "/admin/v1/environments/"+id+"/credentials", nil)
	mustStatus(s.t, r, 201)
	m := r.json(s.t)
	return id, m["secret"].(string), m["id"].(string)
}

// machine creates a machine with a credential and returns (machine id,
// credential secret).
func (s *server) machine(name string) (string, string) {
	s.t.Helper()
	r := s.admin("POST", "/admin/v1/machines", map[string]any{"name": name})
	mustStatus(s.t, r, 201)
	id := r.json(s.t)["id"].(string)
	r = s.admin("POST", "/admin/v1/machines/"+id+"/credentials", nil)
	mustStatus(s.t, r, 201)
	return id, r.json(s.t)["secret"].(string)
}
