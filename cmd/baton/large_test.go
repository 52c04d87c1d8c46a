package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/baton-engine/baton/client"
)

// maxLargeRSS bounds the resident memory of a server running four turns
// of 7.5 MB messages at once.
const maxLargeRSS = 400 << 20

// TestMemoryLargeMessages sends four 7.5 MB messages at once, each on its
// own session, to a real `baton serve` process and checks that its peak
// RSS stays under 400 MB: a turn repeats its message in several events
// and in its result, and these must not all be copied into one buffer.
func TestMemoryLargeMessages(t *testing.T) {
	t.Parallel()
	needProc(t)
	if testing.Short() {
		t.Skip("starts a real server process")
	}
	srv, _, key := memoryServer(t)
	const n, size = 4, 7_500_000
	text := strings.Repeat("a", size)
	type sess struct{ id, key string }
	sessions := make([]sess, n)
	for i := range sessions {
		r := call(t, "POST", srv.clientURL+"/api/v1/sessions", key, map[string]any{})
		mustStatus(t, r, 201)
		m := r.json(t)
		sessions[i] = sess{m["session_id"].(string), m["session_key"].(string)}
		rpcLines(t, srv.clientURL, sessions[i].id, sessions[i].key, `{"jsonrpc":"2.0","id":1,"method":"session.registerDriver"}`)
	}
	before := procMem(t, srv.cmd.Process.Pid, "VmRSS")
	var wg sync.WaitGroup
	results := make([]int, n)
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := `{"jsonrpc":"2.0","id":2,"method":"session.sendMessage","params":{"message":{"role":"user","content":"` + text + `"}}}`
			results[i] = rpcResultSize(t, srv.clientURL, s.id, s.key, body)
		}()
	}
	wg.Wait()
	for i, got := range results {
		if got < size {
			t.Fatalf("session %d: result frame of %d bytes, want the reply of %d", i, got, size)
		}
	}
	peak := procMem(t, srv.cmd.Process.Pid, "VmHWM")
	t.Logf("RSS before %d MiB, peak %d MiB", before>>20, peak>>20)
	if peak > maxLargeRSS {
		t.Errorf("peak RSS %d MiB, want under %d MiB", peak>>20, maxLargeRSS>>20)
	}
}

// rpcLines posts one JSON-RPC request and returns the frames.
func rpcLines(t *testing.T, base, sid, key, body string) [][]byte {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/v1/sessions/"+sid+"/rpc", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
}

// rpcResultSize posts a sendMessage and returns the size of its terminal
// frame, reading the stream without keeping it.
func rpcResultSize(t *testing.T, base, sid, key, body string) int {
	req, _ := http.NewRequest("POST", base+"/api/v1/sessions/"+sid+"/rpc", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	last := 0
	for {
		n := 0
		result := false
		for {
			chunk, err := r.ReadSlice('\n')
			if n == 0 {
				result = bytes.HasPrefix(chunk, []byte(`{"jsonrpc":"2.0","id":`))
			}
			n += len(chunk)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				return last
			}
			break
		}
		if result {
			last = n
		}
	}
}

// TestSDKOutgrowsFrameLimit: a session whose transcript, repeated by
// every provider.request, outgrows the SDK's frame limit still works from
// the SDK: Baton leaves the largest payloads out of the frames (the SDK
// sends its limit as max_frame_bytes), every turn's reply arrives whole,
// and the log keeps the whole events.
func TestSDKOutgrowsFrameLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, benchWarn)
	key := benchKey(s)
	ctx := context.Background()
	const limit = 1 << 20
	sess, err := client.NewHarness(client.Config{BaseURL: s.clientURL, ClientKey: key, MaxFrameSize: limit}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var live []client.Event
	for i := range 4 { // the fourth provider.request repeats seven 300 KB messages
		text := strings.Repeat(string(rune('a'+i)), 300_000)
		reply, err := sess.SendStream(ctx, text, func(ev client.Event) { live = append(live, ev) })
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if got := reply.Message.Text(); !strings.Contains(got, text) {
			t.Fatalf("turn %d: reply of %d bytes, want the echo of %d", i+1, len(got), len(text))
		}
		if n := len(reply.Events); n < 4 {
			t.Fatalf("turn %d: %d events in the reply", i+1, n)
		}
	}
	omitted := 0
	for _, ev := range live {
		if bytes.HasPrefix(ev.Payload, []byte(`{"omitted_bytes":`)) {
			omitted++
			if ev.Type != "provider.request" {
				t.Errorf("a %s payload was left out; only provider requests outgrow the limit here", ev.Type)
			}
		}
	}
	if omitted == 0 {
		t.Fatal("no payload was left out: the test no longer outgrows the limit")
	}
	r := s.admin("GET", "/admin/v1/sessions/"+sess.ID+"/events?limit=200", nil)
	mustStatus(t, r, 200)
	if bytes.Contains(r.body, []byte(`"omitted_bytes"`)) || !bytes.Contains(r.body, []byte(`"provider.request"`)) {
		t.Error("the log holds a stand-in instead of a whole payload")
	}
}
