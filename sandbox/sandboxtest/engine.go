// Package sandboxtest provides a fake Docker Engine API server on a unix
// socket for tests of the docker sandbox driver and of the server that
// uses it — the slice of the API the driver uses, with versioned paths,
// label filters, real multiplexed exec streams and interactive (upgraded)
// exec starts — and builds busybox root filesystems for tests of the
// process driver.
package sandboxtest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Frame is one chunk of exec output: Stream 1 is stdout, 2 stderr.
type Frame struct {
	Stream byte
	Data   string
}

// Script is what an exec does: write Frames, then exit with ExitCode.
// Chunk > 0 writes the encoded stream in pieces of that many bytes, each
// flushed, so frames arrive split across reads. Block makes the exec hang
// (after its frames) until the client goes away.
type Script struct {
	Frames   []Frame
	ExitCode int
	Chunk    int
	Block    bool
}

// Container is a container the fake engine knows.
type Container struct {
	ID         string
	Image      string
	Cmd        []string
	Labels     map[string]string
	AutoRemove bool
	Running    bool
}

// Request is one request the engine served: Version is the "/v1.xx"
// prefix ("" for none), Path the rest, Body the raw request body, Upgrade
// the protocol the client asked to switch to ("tcp" to attach stdin).
type Request struct {
	Method, Version, Path, Query string
	Body                         string
	Upgrade                      string
}

// Engine is the fake Docker engine. Set the exported fields before Start.
type Engine struct {
	// APIVersion is what /version reports ("1.45" when empty).
	APIVersion string
	// Images are present without a pull.
	Images []string
	// Deny is an image reference ("name:tag") whose pull fails.
	Deny string
	// Exec scripts an exec of cmd; nil runs the default, which answers
	// `echo X` with "X\n" on stdout, `cat` with its input, and anything
	// else with exit 127.
	Exec func(cmd []string) Script
	// ExecStdin, when set, scripts an exec created with AttachStdin and
	// started on an upgraded connection, given everything the client wrote
	// up to its half-close; Exec scripts it otherwise.
	ExecStdin func(cmd []string, stdin []byte) Script

	mu         sync.Mutex
	images     map[string]bool
	pulls      []string
	containers map[string]*Container
	execs      map[string]execState
	requests   []Request
	seq        int

	stop     chan struct{} // closed when the engine stops
	hijacked sync.WaitGroup
}

type execState struct {
	container   string
	cmd         []string
	attachStdin bool
	exit        *int
}

var versioned = regexp.MustCompile(`^/v[0-9]+\.[0-9]+`)

// Start serves the engine on a fresh unix socket until the test ends and
// returns the socket path.
func (e *Engine) Start(t testing.TB) string {
	t.Helper()
	e.images = map[string]bool{}
	for _, img := range e.Images {
		e.images[img] = true
	}
	e.containers = map[string]*Container{}
	e.execs = map[string]execState{}
	e.stop = make(chan struct{})
	dir, err := os.MkdirTemp("", "dk") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
		close(e.stop) // ends blocked upgraded execs, which Close does not track
		e.hijacked.Wait()
		os.RemoveAll(dir)
	})
	return sock
}

// Add registers an existing container (as if left by an earlier run).
func (e *Engine) Add(c Container) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cp := c
	e.containers[c.ID] = &cp
}

// Containers returns the containers that exist, sorted by id.
func (e *Engine) Containers() []Container {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Container, 0, len(e.containers))
	for _, c := range e.containers {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Pulls returns the image references pulled so far.
func (e *Engine) Pulls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.pulls...)
}

// Requests returns every request served so far.
func (e *Engine) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Request(nil), e.requests...)
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, format string, args ...any) {
	reply(w, status, map[string]string{"message": fmt.Sprintf(format, args...)})
}

// ServeHTTP implements the engine's API.
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ver := versioned.FindString(r.URL.Path)
	path := strings.TrimPrefix(r.URL.Path, ver)
	e.mu.Lock()
	e.requests = append(e.requests, Request{Method: r.Method, Version: ver, Path: path, Query: r.URL.RawQuery, Body: string(body), Upgrade: r.Header.Get("Upgrade")})
	if strings.HasPrefix(path, "/exec/") && strings.HasSuffix(path, "/start") && r.Method == http.MethodPost {
		e.mu.Unlock()
		e.execStart(w, r, strings.TrimSuffix(strings.TrimPrefix(path, "/exec/"), "/start"))
		return
	}
	defer e.mu.Unlock()
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && path == "/_ping":
		w.Write([]byte("OK"))
	case r.Method == http.MethodGet && path == "/version":
		v := e.APIVersion
		if v == "" {
			v = "1.45"
		}
		reply(w, 200, map[string]string{"ApiVersion": v, "MinAPIVersion": "1.24", "Version": "fake"})
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/images/") && strings.HasSuffix(path, "/json"):
		name := strings.TrimSuffix(strings.TrimPrefix(path, "/images/"), "/json")
		if !e.images[name] {
			fail(w, 404, "No such image: %s", name)
			return
		}
		reply(w, 200, map[string]string{"Id": "sha256:abc"})
	case r.Method == http.MethodPost && path == "/images/create":
		ref := r.URL.Query().Get("fromImage") + ":" + r.URL.Query().Get("tag")
		e.pulls = append(e.pulls, ref)
		if ref == e.Deny {
			w.Write([]byte(`{"status":"Pulling"}` + "\n" + `{"error":"pull access denied"}` + "\n"))
			return
		}
		e.images[ref] = true
		w.Write([]byte(`{"status":"Pulling"}` + "\n" + `{"status":"Downloaded"}` + "\n"))
	case r.Method == http.MethodPost && path == "/containers/create":
		var req struct {
			Image      string
			Cmd        []string
			Labels     map[string]string
			HostConfig struct{ AutoRemove bool }
		}
		if err := json.Unmarshal(body, &req); err != nil {
			fail(w, 400, "bad body: %v", err)
			return
		}
		if !e.images[req.Image] {
			fail(w, 404, "No such image: %s", req.Image)
			return
		}
		e.seq++
		id := fmt.Sprintf("c%063d", e.seq)
		e.containers[id] = &Container{ID: id, Image: req.Image, Cmd: req.Cmd, Labels: req.Labels, AutoRemove: req.HostConfig.AutoRemove}
		reply(w, 201, map[string]any{"Id": id, "Warnings": []string{}})
	case r.Method == http.MethodGet && path == "/containers/json":
		var filters map[string][]string
		json.Unmarshal([]byte(r.URL.Query().Get("filters")), &filters)
		out := []map[string]any{}
		for _, c := range e.containers {
			if (r.URL.Query().Get("all") == "1" || c.Running) && matches(c.Labels, filters["label"]) {
				out = append(out, map[string]any{"Id": c.ID, "Labels": c.Labels})
			}
		}
		reply(w, 200, out)
	case len(seg) == 3 && seg[0] == "containers" && r.Method == http.MethodPost:
		c := e.containers[seg[1]]
		if c == nil {
			fail(w, 404, "No such container: %s", seg[1])
			return
		}
		switch seg[2] {
		case "start":
			if c.Running {
				w.WriteHeader(304)
				return
			}
			c.Running = true
			w.WriteHeader(204)
		case "stop":
			if !c.Running {
				w.WriteHeader(304)
				return
			}
			c.Running = false
			if c.AutoRemove {
				delete(e.containers, c.ID)
			}
			w.WriteHeader(204)
		case "exec":
			if !c.Running {
				fail(w, 409, "Container %s is not running", c.ID)
				return
			}
			var req struct {
				Cmd         []string
				AttachStdin bool
			}
			json.Unmarshal(body, &req)
			e.seq++
			id := fmt.Sprintf("e%063d", e.seq)
			e.execs[id] = execState{container: c.ID, cmd: req.Cmd, attachStdin: req.AttachStdin}
			reply(w, 201, map[string]string{"Id": id})
		default:
			http.NotFound(w, r)
		}
	case len(seg) == 2 && seg[0] == "containers" && r.Method == http.MethodDelete:
		if e.containers[seg[1]] == nil {
			fail(w, 404, "No such container: %s", seg[1])
			return
		}
		delete(e.containers, seg[1])
		w.WriteHeader(204)
	case len(seg) == 3 && seg[0] == "exec" && seg[2] == "json" && r.Method == http.MethodGet:
		x, ok := e.execs[seg[1]]
		if !ok {
			fail(w, 404, "No such exec instance: %s", seg[1])
			return
		}
		reply(w, 200, map[string]any{"ID": seg[1], "Running": x.exit == nil, "ExitCode": x.exit, "ContainerID": x.container})
	default:
		fail(w, 404, "page not found")
	}
}

// execStart runs an exec: a plain start answers 200 with the multiplexed
// output; a start that asks to upgrade the connection (Connection:
// Upgrade, Upgrade: tcp) is answered 101 on the hijacked connection, which
// then carries stdin up — read to the client's half-close when the exec
// attached it — and the output down.
func (e *Engine) execStart(w http.ResponseWriter, r *http.Request, id string) {
	e.mu.Lock()
	x, ok := e.execs[id]
	script, scriptIn := e.Exec, e.ExecStdin
	e.mu.Unlock()
	if !ok {
		fail(w, 404, "No such exec instance: %s", id)
		return
	}
	out := io.Writer(w)
	flush := func() {}
	if f, ok := w.(http.Flusher); ok {
		flush = f.Flush
	}
	done := r.Context().Done()
	var stdin []byte
	if strings.EqualFold(r.Header.Get("Upgrade"), "tcp") && strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		e.hijacked.Add(1)
		defer e.hijacked.Done()
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		rw.Flush()
		if x.attachStdin {
			stdin, _ = io.ReadAll(rw) // until the client half-closes
		}
		out, flush, done = rw, func() { rw.Flush() }, e.stop
	} else {
		w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
		w.WriteHeader(200)
	}
	var s Script
	switch {
	case x.attachStdin && scriptIn != nil:
		s = scriptIn(x.cmd, stdin)
	case script != nil:
		s = script(x.cmd)
	default:
		s = defaultScript(x.cmd, stdin)
	}
	var stream []byte
	for _, f := range s.Frames {
		var hdr [8]byte
		hdr[0] = f.Stream
		binary.BigEndian.PutUint32(hdr[4:], uint32(len(f.Data)))
		stream = append(append(stream, hdr[:]...), f.Data...)
	}
	chunk := s.Chunk
	if chunk <= 0 {
		chunk = len(stream) + 1
	}
	for len(stream) > 0 {
		n := min(chunk, len(stream))
		out.Write(stream[:n])
		stream = stream[n:]
		flush()
	}
	if s.Block {
		<-done
		return
	}
	e.mu.Lock()
	code := s.ExitCode
	x.exit = &code
	e.execs[id] = x
	e.mu.Unlock()
}

func defaultScript(cmd []string, stdin []byte) Script {
	switch {
	case len(cmd) == 3 && strings.HasPrefix(cmd[2], "echo "):
		return Script{Frames: []Frame{{1, strings.TrimPrefix(cmd[2], "echo ") + "\n"}}}
	case len(cmd) == 3 && cmd[2] == "cat":
		return Script{Frames: []Frame{{1, string(stdin)}}}
	}
	return Script{Frames: []Frame{{2, "sh: not found\n"}}, ExitCode: 127}
}

// matches reports whether labels satisfy every "key" or "key=value"
// filter.
func matches(labels map[string]string, filters []string) bool {
	for _, f := range filters {
		k, v, hasV := strings.Cut(f, "=")
		got, ok := labels[k]
		if !ok || (hasV && got != v) {
			return false
		}
	}
	return true
}
