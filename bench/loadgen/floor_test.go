package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary be the floor server loadgen -floor starts.
func TestMain(m *testing.M) {
	if mock := os.Getenv(floorEnv); mock != "" {
		if err := serveFloor(mock, os.Getenv(floorHistoryEnv), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestFloorMeasuresAChildServer(t *testing.T) {
	var out, errb strings.Builder
	code := run(context.Background(), []string{"-floor", "-sessions", "2", "-round-trips", "3", "-mock-addr", "127.0.0.1:0", "-floor-history", "1000"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"2 sessions, 1000-byte history",
		"round trips       6 in ",
		"µs per round trip",
		"mock provider     12 calls served", // two model calls per round trip
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The floor's two provider requests are the two a round trip makes: the
// mock calls the tool on the first and answers the results of the second.
// Its notices are NDJSON frames carrying them.
func TestFloorRequestsAreARoundTrip(t *testing.T) {
	f := newFloorServer("http://127.0.0.1:1", 2000)
	for i, wantResults := range []bool{false, true} {
		req, err := parseRequest(f.call[i])
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if req.results != wantResults || string(req.tool) != `"get_time"` {
			t.Errorf("call %d: results %v, tool %s", i, req.results, req.tool)
		}
		if len(f.call[i]) < 2000 {
			t.Errorf("call %d is %d bytes, want the 2000-byte history in it", i, len(f.call[i]))
		}
		frame := f.notice[i]
		if strings.Count(string(frame), "\n") != 1 || !json.Valid(frame) {
			t.Errorf("notice %d is not one NDJSON frame: %.80s", i, frame)
		}
	}
	if !json.Valid(f.result) {
		t.Errorf("result frame %s", f.result)
	}
}
