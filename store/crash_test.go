package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// crashChildEnv switches the test binary into the crash-test child: the
// value is the SQLite file it appends to.
const crashChildEnv = "BATON_STORE_CRASH_CHILD"

const (
	crashSessions = 100
	crashAcks     = 5000 // acknowledgements the parent reads before killing
)

func crashSessionID(i int) string { return fmt.Sprintf("ses_crash%03d", i) }

// crashEvent returns the event a crash-test session appends as its seq-th:
// every third one a provider request of a growing conversation (stored as
// deltas), the others a tick.
func crashEvent(i int, seq int64, conv *conversation) *baton.Event {
	if seq%3 == 0 {
		return &baton.Event{SessionID: crashSessionID(i), Type: baton.EventProviderReq, Payload: conv.next()}
	}
	return baton.NewEvent(crashSessionID(i), "", "crash.tick", map[string]int{"i": i})
}

// crashChild opens the store, then appends from one goroutine per session
// forever, printing "<session index> <seq>" for each event as soon as its
// Append returned. It runs until it is killed.
func crashChild(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	db, err := Open(ctx, Options{URL: path})
	if err != nil {
		fail(err)
	}
	for i := range crashSessions {
		s := &baton.Session{ID: crashSessionID(i), ClientKeyID: "key_crash", ProfileID: "pro_crash"}
		if err := db.CreateSession(ctx, s, nil); err != nil {
			fail(err)
		}
	}
	var mu sync.Mutex
	for i := range crashSessions {
		go func() {
			conv := &conversation{session: crashSessionID(i)}
			for seq := int64(1); ; seq++ {
				ev := crashEvent(i, seq, conv)
				if err := db.Append(ctx, ev); err != nil {
					fail(err)
				}
				if ev.Seq != seq {
					fail(fmt.Errorf("session %d: appended seq %d, want %d", i, ev.Seq, seq))
				}
				mu.Lock()
				_, err := fmt.Fprintf(os.Stdout, "%d %d\n", i, ev.Seq) // unbuffered: one write per ack
				mu.Unlock()
				if err != nil {
					fail(err)
				}
			}
		}()
	}
	select {}
}

// TestCrashSafety kills a process that is appending as fast as it can and
// checks that every append it acknowledged survived, with gap-free seqs
// and the payloads it appended, byte for byte.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	acked := make(map[int]int64) // session index → highest acknowledged seq
	n := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() { // keeps reading after the kill: lines already written are acks too
		idx, seq, err := parseAck(sc.Text())
		if err != nil {
			t.Fatalf("child output %q: %v", sc.Text(), err)
		}
		acked[idx] = max(acked[idx], seq)
		n++
		if n == crashAcks {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	werr := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("child ended with %v, want killed by SIGKILL; stderr:\n%s", werr, stderr.String())
	}
	if n < crashAcks {
		t.Fatalf("child acknowledged only %d appends", n)
	}

	db := openURL(t, path)
	for i := range crashSessions {
		evs := allEvents(t, db, crashSessionID(i))
		if diff := cmp.Diff(oneTo(len(evs)), seqs(evs)); diff != "" {
			t.Errorf("session %d seqs not gap-free (-want +got):\n%s", i, diff)
		}
		if int64(len(evs)) < acked[i] {
			t.Errorf("session %d: %d events survived, but seq %d was acknowledged", i, len(evs), acked[i])
		}
		conv := &conversation{session: crashSessionID(i)}
		for _, e := range evs {
			want := crashEvent(i, e.Seq, conv)
			if e.Type != want.Type || !bytes.Equal(e.Payload, want.Payload) {
				t.Fatalf("session %d event %d: %s %.80s…, want %s %.80s…", i, e.Seq, e.Type, e.Payload, want.Type, want.Payload)
			}
		}
	}
	var deltas int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM session_events WHERE base_seq IS NOT NULL`).Scan(&deltas); err != nil {
		t.Fatal(err)
	}
	if deltas == 0 {
		t.Error("no provider request was stored as a delta")
	}
	t.Logf("%d appends acknowledged before SIGKILL, all present after reopen (%d stored as deltas)", n, deltas)
}

func parseAck(line string) (int, int64, error) {
	a, b, ok := strings.Cut(line, " ")
	if !ok {
		return 0, 0, errors.New("no space")
	}
	idx, err := strconv.Atoi(a)
	if err != nil || idx < 0 || idx >= crashSessions {
		return 0, 0, fmt.Errorf("bad session index %q", a)
	}
	seq, err := strconv.ParseInt(b, 10, 64)
	if err != nil || seq < 1 {
		return 0, 0, fmt.Errorf("bad seq %q", b)
	}
	return idx, seq, nil
}
