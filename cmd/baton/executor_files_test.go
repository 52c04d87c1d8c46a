package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	exsdk "github.com/baton-engine/baton/client/executor"
)

// End-to-end tests of session files on machine executors: the server
// sends fs.mount on its own — to a remote sandbox's executor when the
// sandbox starts and after the executor resumes, to a brain's after its
// first turn — and fs.unmount with flush before it stops or closes them.

// fsMountFrame matches an fs.mount as the executor reads it: its session,
// epoch and the workspace view's token.
var fsMountFrame = regexp.MustCompile(`"method":"fs\.mount","params":\{"session_id":"([^"]+)","epoch":(\d+),"views":\[\{"view":"workspace","path":"/workspace","service_url":"([^"]+)","token":"([^"]+)"`)

// fsMount is one fs.mount an executor read.
type fsMount struct {
	session, url, token string
	epoch               int64
}

// fsMounts lists the fs.mount requests the executors of n read so far.
func fsMounts(n *execNet) []fsMount {
	var out []fsMount
	for _, m := range fsMountFrame.FindAllStringSubmatch(n.read(), -1) {
		ep, _ := strconv.ParseInt(m[2], 10, 64)
		out = append(out, fsMount{session: m[1], epoch: ep, url: m[3], token: m[4]})
	}
	return out
}

// TestExecutorShellFilesEndToEnd: a remote sandbox on an SDK executor
// with Files set sees the session's files (synced, and through FUSE where
// it mounts); after the executor reconnects the views are mounted again
// for the new epoch and the old epoch's token is refused; what a command
// writes reaches the client once the sandbox stops (fs.unmount with
// flush before session.stop).
func TestExecutorShellFilesEndToEnd(t *testing.T) {
	for _, mode := range []string{exsdk.MountSync, exsdk.MountFUSE} {
		t.Run(mode, func(t *testing.T) { shellFiles(t, mode) })
	}
}

func shellFiles(t *testing.T, mode string) {
	s := startServer(t)
	mch, secret := s.machine("files-" + mode)
	image := "executor:" + mch
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "available_sandboxes": []string{image}})
	_, key := s.clientKey("k", pro)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	mustStatus(t, rawCall(t, "PUT", s.clientURL+"/api/v1/sessions/"+sid+"/files/a.txt", sk, "application/octet-stream", "from the client\n"), 200)

	root := t.TempDir()
	n := newExecNet(t, s)
	startSDKExecutor(t, n, exsdk.Config{
		Credential: secret, Scope: exsdk.Machine(mch), ExecutorID: "exe_files",
		Capabilities: exsdk.Capabilities{Process: &exsdk.ProcessCapability{}},
		Process:      &exsdk.Shell{Dir: t.TempDir()},
		Files:        &exsdk.FileMounts{Root: root, Mode: mode, SyncInterval: time.Hour},
	})
	frames := rpcAll(t, s, sid, sk, `{"jsonrpc":"2.0","id":1,"method":"session.startRemoteSandbox","params":{"image":"`+image+`"}}`)
	last := frames[len(frames)-1]
	if last.Error != nil && strings.Contains(string(last.raw), "mount_failed") && mode == exsdk.MountFUSE {
		t.Skipf("FUSE cannot mount here: %s", last.raw)
	}
	if last.Error != nil {
		t.Fatalf("start: %s", last.raw)
	}
	var started struct {
		SandboxID string `json:"sandbox_id"`
	}
	_ = json.Unmarshal(last.Result, &started)
	mounts := fsMounts(n)
	if len(mounts) != 1 || mounts[0].session != started.SandboxID || !strings.HasSuffix(mounts[0].url, "/v1/fs/"+sid+"/workspace") {
		t.Fatalf("fs.mount requests %+v for sandbox %s of %s", mounts, started.SandboxID, sid)
	}
	first := mounts[0]
	dir := filepath.Join(root, "workspace")
	exec := func(command string) baton.ExecResult {
		t.Helper()
		res, _ := rpcResult(t, s, sid, sk, "session.execRemoteSandbox", map[string]any{"command": command})
		var out baton.ExecResult
		_ = json.Unmarshal(res, &out)
		return out
	}
	if got := exec("cat " + dir + "/a.txt"); got.Stdout != "from the client\n" || got.ExitCode != 0 {
		t.Fatalf("cat in the sandbox: %+v", got)
	}

	// The executor's link drops; it reconnects and resumes the sandbox
	// under a new epoch, for which the views are mounted again.
	n.kill()
	n.waitFor(t, "fs.mount after the resume", func() bool { return len(fsMounts(n)) == 2 })
	again := fsMounts(n)[1]
	if again.session != started.SandboxID || again.epoch <= first.epoch || again.token == first.token {
		t.Fatalf("fs.mount after the resume %+v (first %+v)", again, first)
	}
	fsURL := s.clientURL + "/v1/fs/" + sid + "/workspace/a.txt"
	v1Error(t, rawCall(t, "GET", fsURL, first.token, "", ""), 401, "unauthorized", "the view token is for an earlier binding of the session")
	if r := rawCall(t, "GET", fsURL, again.token, "", ""); r.status != 200 || string(r.body) != "from the client\n" {
		t.Fatalf("the new token: %d %s", r.status, r.body)
	}

	// What a command writes reaches the file area when the sandbox stops.
	if got := exec("mkdir -p " + dir + "/out && echo from the sandbox > " + dir + "/out/b.txt"); got.ExitCode != 0 {
		t.Fatalf("write in the sandbox: %+v", got)
	}
	rpcResult(t, s, sid, sk, "session.stopRemoteSandbox", map[string]any{})
	read := n.read()
	if u, st := strings.Index(read, `"method":"fs.unmount","params":{"session_id":"`+started.SandboxID+`","flush":true}`),
		strings.Index(read, `"method":"session.stop","params":{"session_id":"`+started.SandboxID+`"`); u < 0 || st < u {
		t.Errorf("fs.unmount at %d, session.stop at %d: want the unmount with flush first", u, st)
	}
	r = rawCall(t, "GET", s.clientURL+"/api/v1/sessions/"+sid+"/files/out/b.txt", sk, "", "")
	if r.status != 200 || string(r.body) != "from the sandbox\n" {
		t.Fatalf("the sandbox's file through the client API: %d %s", r.status, r.body)
	}

	// Closing the session with the sandbox still running keeps what the
	// sandbox wrote last: the flush at unmount comes after the close.
	rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": image})
	if got := exec("echo at close > " + dir + "/out/c.txt"); got.ExitCode != 0 {
		t.Fatalf("write before close: %+v", got)
	}
	mustStatus(t, rawCall(t, "DELETE", s.clientURL+"/api/v1/sessions/"+sid, sk, "", ""), 200)
	r = rawCall(t, "GET", s.clientURL+"/api/v1/sessions/"+sid+"/files/out/c.txt", sk, "", "")
	if r.status != 200 || string(r.body) != "at close\n" {
		t.Fatalf("the file written before close: %d %s", r.status, r.body)
	}
}

// TestBrainFilesEndToEnd: a brain's agent session gets its session's
// files mounted after its first turn.start (epoch of the turn, a token
// the file service takes), once; closing the session unmounts them with
// flush before session.close.
func TestBrainFilesEndToEnd(t *testing.T) {
	b := newBrainServer(t)
	cfg := b.config()
	cfg.Files = &exsdk.FileMounts{Root: t.TempDir(), Mode: exsdk.MountSync, SyncInterval: time.Hour}
	startSDKExecutor(t, b.net, cfg)
	sess, _ := b.driver(t, "", nil)
	ctx := loopCtx(t)
	if _, err := sess.WriteFile(ctx, "a.txt", []byte("for the brain")); err != nil {
		t.Fatal(err)
	}
	mustReply(t, recv(t, goSend(ctx, sess, "hello")), "hi there")
	b.net.waitFor(t, "fs.mount of the brain session", func() bool { return len(fsMounts(b.net)) > 0 })
	m := fsMounts(b.net)[0]
	b.agent.mu.Lock()
	epoch := b.agent.md.Epoch
	b.agent.mu.Unlock()
	if m.session != sess.ID || m.epoch != epoch {
		t.Fatalf("fs.mount %+v, want session %s at the turn's epoch %d", m, sess.ID, epoch)
	}
	if r := rawCall(t, "GET", b.clientURL+"/v1/fs/"+sess.ID+"/workspace/a.txt", m.token, "", ""); r.status != 200 || string(r.body) != "for the brain" {
		t.Fatalf("the brain's view token: %d %s", r.status, r.body)
	}
	mustReply(t, recv(t, goSend(ctx, sess, "hello")), "hi there")
	if got := len(fsMounts(b.net)); got != 1 {
		t.Errorf("%d fs.mount requests after the second turn, want 1", got)
	}

	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.net.waitFor(t, "session.close", func() bool { return strings.Contains(b.net.read(), `"method":"session.close"`) })
	read := b.net.read()
	if u, c := strings.Index(read, `"method":"fs.unmount","params":{"session_id":"`+sess.ID+`","flush":true}`), strings.Index(read, `"method":"session.close"`); u < 0 || c < u {
		t.Errorf("fs.unmount at %d, session.close at %d: want the unmount with flush first", u, c)
	}
}
