package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/sandbox/sandboxtest"
)

// TestDockerSandboxEndToEnd runs the remote sandbox RPCs, an Auto-mode
// sandbox tool and close against a fake Docker engine on a unix socket.
func TestDockerSandboxEndToEnd(t *testing.T) {
	t.Parallel()
	eng := &sandboxtest.Engine{Images: []string{"alpine:3"}}
	sock := eng.Start(t)
	// A sandbox left behind by an earlier (crashed) run of this server is
	// removed at start; another server's is not.
	s := startServer(t, func(env map[string]string) { env["BATON_DOCKER_SOCKET"] = sock })
	eng.Add(sandboxtest.Container{ID: "foreign", Labels: map[string]string{"dev.baton.sandbox": "1", "dev.baton.instance": "other"}, Running: true})

	pro := loopProfile(t, s, map[string]any{
		"primary_provider": "script", "available_sandboxes": []string{"alpine:3"}, "allowed_tools": []string{"shell"},
	})
	_, key := s.clientKey("k", pro)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{
		"sandbox_tools": []any{map[string]any{"name": "shell", "description": "run a command", "input_schema": map[string]any{"type": "object"}}},
	})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})

	res, _ := rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": "alpine:3"})
	var started struct {
		SandboxID string `json:"sandbox_id"`
		Image     string `json:"image"`
		StartedAt string `json:"started_at"`
	}
	json.Unmarshal(res, &started)
	if started.Image != "alpine:3" || started.StartedAt == "" {
		t.Fatalf("start result %s", res)
	}
	cs := eng.Containers()
	if len(cs) != 2 || cs[0].ID != started.SandboxID || !cs[0].Running || cs[0].Labels["dev.baton.sandbox"] != "1" || !cs[0].AutoRemove {
		t.Fatalf("containers %+v, started %q", cs, started.SandboxID)
	}

	res, _ = rpcResult(t, s, sid, sk, "session.execRemoteSandbox", map[string]any{"command": "echo hi"})
	if string(res) != `{"stdout":"hi\n","stderr":"","exit_code":0}` {
		t.Errorf("exec result %s", res)
	}

	// An Auto-mode sandbox tool runs in the sandbox without pausing.
	res, _ = rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": `call shell {"command":"echo from-tool"}`}})
	var tr turnResult
	if err := json.Unmarshal(res, &tr); err != nil {
		t.Fatal(err)
	}
	if got := tr.Message.Text(); !strings.Contains(got, "from-tool") {
		t.Errorf("reply %q", got)
	}
	results := ofType(tr.Events, "tool.result")
	if len(results) != 1 {
		t.Fatalf("events %v", types(tr.Events))
	}
	want := map[string]any{"dispatch": "sandbox", "is_error": false, "content": []any{map[string]any{"type": "text", "text": "from-tool\n"}}}
	got := payload(t, results[0])
	delete(got, "tool_use_id")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tool.result (-want +got):\n%s", d)
	}
	if resp := ofType(tr.Events, "sandbox.response"); len(resp) != 1 || payload(t, resp[0])["sandbox_id"] != started.SandboxID {
		t.Errorf("sandbox.response %v", resp)
	}

	res, _ = rpcResult(t, s, sid, sk, "session.stopRemoteSandbox", map[string]any{})
	if !strings.Contains(string(res), `"stopped":true`) {
		t.Errorf("stop result %s", res)
	}
	if d := cmp.Diff([]string{
		`session.sandbox.start {"dispatch":"remote","image":"alpine:3"}`,
		`session.sandbox.running {"dispatch":"remote","image":"alpine:3","sandbox_id":"ID","unsandboxed":false}`,
		`session.sandbox.stop {"dispatch":"remote","image":"alpine:3","reason":"explicit","sandbox_id":"ID"}`,
		`session.sandbox.stopped {"dispatch":"remote","image":"alpine:3","reason":"explicit","sandbox_id":"ID","unsandboxed":false}`,
	}, sandboxEvents(t, s, sid, sk, started.SandboxID)); d != "" {
		t.Errorf("sandbox events (-want +got):\n%s", d)
	}
	if cs := eng.Containers(); len(cs) != 1 || cs[0].ID != "foreign" {
		t.Errorf("after stop: %+v", cs)
	}

	// Closing the session stops a running sandbox: the engine sees stop
	// and delete for it.
	res, _ = rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": "alpine:3"})
	json.Unmarshal(res, &started)
	mustStatus(t, s.client("DELETE", "/api/v1/sessions/"+sid, sk, nil), 200)
	var calls []string
	for _, rq := range eng.Requests() {
		if strings.Contains(rq.Path, started.SandboxID) {
			calls = append(calls, rq.Method+" "+strings.Replace(rq.Path, started.SandboxID, "ID", 1))
		}
	}
	wantCalls := []string{"POST /containers/ID/start", "POST /containers/ID/stop", "DELETE /containers/ID"}
	if d := cmp.Diff(wantCalls, calls); d != "" {
		t.Errorf("engine calls for the second sandbox (-want +got):\n%s", d)
	}
	if cs := eng.Containers(); len(cs) != 1 || cs[0].ID != "foreign" {
		t.Errorf("after close: %+v", cs)
	}
}

// TestDockerSandboxExecOutputCap: execRemoteSandbox keeps at most 1 MiB
// of each stream; a cut stream (and only that one) ends with a note of
// how many bytes are missing, within the 1 MiB, and never splits a
// character.
func TestDockerSandboxExecOutputCap(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	eng := &sandboxtest.Engine{Images: []string{"alpine:3"}, Exec: func(cmd []string) sandboxtest.Script {
		switch cmd[2] {
		case "big-out":
			return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 1, Data: strings.Repeat("y", mib+500)}, {Stream: 2, Data: "warn\n"}}}
		case "big-err":
			return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 1, Data: "ok\n"}, {Stream: 2, Data: strings.Repeat("é", 600000)}}, ExitCode: 1}
		}
		return sandboxtest.Script{ExitCode: 127}
	}}
	sock := eng.Start(t)
	s, sid, sk := dockerSandboxSession(t, sock)

	type result struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}
	tests := []struct {
		command string
		want    result
	}{
		// 35 bytes of y give way to the note.
		{"big-out", result{Stdout: strings.Repeat("y", mib-35) + "\n[output truncated: 535 more bytes]", Stderr: "warn\n"}},
		// 1.2 MB of 2-byte characters: 524 269 of them are kept.
		{"big-err", result{Stdout: "ok\n", Stderr: strings.Repeat("é", (mib-38)/2) + "\n[output truncated: 151462 more bytes]", ExitCode: 1}},
	}
	for _, tc := range tests {
		res, _ := rpcResult(t, s, sid, sk, "session.execRemoteSandbox", map[string]any{"command": tc.command})
		var got result
		if err := json.Unmarshal(res, &got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: stdout %d bytes ending %q, stderr %d bytes ending %q, exit %d; want %d ending %q, %d ending %q, exit %d",
				tc.command, len(got.Stdout), tail(got.Stdout), len(got.Stderr), tail(got.Stderr), got.ExitCode,
				len(tc.want.Stdout), tail(tc.want.Stdout), len(tc.want.Stderr), tail(tc.want.Stderr), tc.want.ExitCode)
		}
		if len(got.Stdout) > mib || len(got.Stderr) > mib {
			t.Errorf("%s: %d and %d bytes, over 1 MiB", tc.command, len(got.Stdout), len(got.Stderr))
		}
	}
}

// tail is the end of s, for messages.
func tail(s string) string {
	return s[max(len(s)-48, 0):]
}

// TestDockerSandboxCleanupAtStart: this server's sandboxes left by a
// crashed run are removed when it starts again, and at shutdown.
func TestDockerSandboxCleanupAtStart(t *testing.T) {
	t.Parallel()
	eng := &sandboxtest.Engine{Images: []string{"alpine:3"}}
	sock := eng.Start(t)
	s, _, _ := dockerSandboxSession(t, sock)
	mine := eng.Containers()[0]
	s.stop()
	if cs := eng.Containers(); len(cs) != 0 {
		t.Fatalf("left after shutdown: %+v", cs)
	}

	// As after a crash: the container is still there when the server
	// comes back.
	eng.Add(mine)
	eng.Add(sandboxtest.Container{ID: "foreign", Labels: map[string]string{"dev.baton.sandbox": "1", "dev.baton.instance": "other"}})
	runServer(t, s.dir, s.env)
	if cs := eng.Containers(); len(cs) != 1 || cs[0].ID != "foreign" {
		t.Fatalf("after restart: %+v", cs)
	}
}

// sandboxEvents lists the session's session.sandbox.* events as "type
// payload", with id replaced by ID.
func sandboxEvents(t *testing.T, s *server, sid, sk, id string) []string {
	t.Helper()
	var out []string
	for _, it := range eventPage(t, s.client("GET", "/api/v1/sessions/"+sid+"/events", sk, nil)) {
		if strings.HasPrefix(it.EventType, "session.sandbox.") && it.EventType != "session.sandbox.available" {
			out = append(out, it.EventType+" "+strings.ReplaceAll(string(it.Payload), id, "ID"))
		}
	}
	return out
}

// dockerSandboxSession starts a server on the fake Docker engine at sock
// and a session, registered as driver, whose remote sandbox (alpine:3)
// runs.
func dockerSandboxSession(t *testing.T, sock string) (s *server, sid, sk string) {
	t.Helper()
	s = startServer(t, func(env map[string]string) { env["BATON_DOCKER_SOCKET"] = sock })
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "available_sandboxes": []string{"alpine:3"}})
	_, key := s.clientKey("k", pro)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{})
	mustStatus(t, r, 201)
	sid, sk = r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": "alpine:3"})
	return s, sid, sk
}
