package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	exsdk "github.com/baton-engine/baton/client/executor"
)

// End-to-end tests of session files on machine executors: the server
// sends fs.mount on its own — to a remote sandbox's executor when the
// sandbox starts and after the executor resumes, to a brain's after its
// first turn — and fs.unmount with flush before it stops or closes them.

// fsMountFrame matches an fs.mount as the executor reads it: its session,
// epoch and the workspace view's path, service URL and token.
var fsMountFrame = regexp.MustCompile(`"method":"fs\.mount","params":\{"session_id":"([^"]+)","epoch":(\d+),"views":\[\{"view":"workspace","path":"([^"]+)","service_url":"([^"]+)","token":"([^"]+)"`)

// fsMount is one fs.mount an executor read.
type fsMount struct {
	session, path, url, token string
	epoch                     int64
}

// fsMounts lists the fs.mount requests the executors of n read so far.
func fsMounts(n *execNet) []fsMount {
	var out []fsMount
	for _, m := range fsMountFrame.FindAllStringSubmatch(n.read(), -1) {
		ep, _ := strconv.ParseInt(m[2], 10, 64)
		out = append(out, fsMount{session: m[1], epoch: ep, path: m[3], url: m[4], token: m[5]})
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
	onlySingleNode(t, "executor shells serve only the sessions of the node they are connected to")
	// Not parallel: it mounts a FUSE file system this process serves, and
	// another test's fork (os/exec) while a FUSE request is pending can
	// deadlock the process; serial tests run before the parallel ones.
	for _, mode := range []string{exsdk.MountSync, exsdk.MountFUSE} {
		t.Run(mode, func(t *testing.T) { shellFiles(t, mode) })
	}
}

func shellFiles(t *testing.T, mode string) {
	s := startServer(t)
	mch, secret := s.machine("files-" + mode)
	image := "executor:" + mch
	key := sandboxKey(t, s, image)
	sid, sk := filesSession(t, s, key, "from the client\n")

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
	if len(mounts) != 1 || mounts[0].session != started.SandboxID || !strings.HasSuffix(mounts[0].url, "/v1/fs/"+sid+"/workspace") ||
		mounts[0].path != "/sessions/"+started.SandboxID+"/workspace" {
		t.Fatalf("fs.mount requests %+v for sandbox %s of %s", mounts, started.SandboxID, sid)
	}
	first := mounts[0]
	dir := filepath.Join(root, "sessions", started.SandboxID, "workspace")
	exec := func(command string) baton.ExecResult {
		t.Helper()
		return sandboxExec(t, s, sid, sk, command)
	}
	if got := exec("cat " + dir + "/a.txt"); got.Stdout != "from the client\n" || got.ExitCode != 0 {
		t.Fatalf("cat in the sandbox: %+v", got)
	}
	if got := exec("cat a.txt"); got.Stdout != "from the client\n" || got.ExitCode != 0 { // commands run in the workspace
		t.Fatalf("relative cat in the sandbox: %+v", got)
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
	if got := exec("mkdir -p out && echo from the sandbox > out/b.txt"); got.ExitCode != 0 {
		t.Fatalf("write in the sandbox: %+v", got)
	}
	rpcResult(t, s, sid, sk, "session.stopRemoteSandbox", map[string]any{})
	read := n.read()
	if u, st := strings.Index(read, `"method":"fs.unmount","params":{"session_id":"`+started.SandboxID+`","flush":true}`),
		strings.Index(read, `"method":"session.stop","params":{"session_id":"`+started.SandboxID+`"`); u < 0 || st < u {
		t.Errorf("fs.unmount at %d, session.stop at %d: want the unmount with flush first", u, st)
	}
	r := rawCall(t, "GET", s.clientURL+"/api/v1/sessions/"+sid+"/files/out/b.txt", sk, "", "")
	if r.status != 200 || string(r.body) != "from the sandbox\n" {
		t.Fatalf("the sandbox's file through the client API: %d %s", r.status, r.body)
	}

	// Closing the session with the sandbox still running keeps what the
	// sandbox wrote last: the flush at unmount comes after the close.
	rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": image})
	if got := exec("echo at close > out/c.txt"); got.ExitCode != 0 { // the new sandbox's own workspace
		t.Fatalf("write before close: %+v", got)
	}
	mustStatus(t, rawCall(t, "DELETE", s.clientURL+"/api/v1/sessions/"+sid, sk, "", ""), 200)
	r = rawCall(t, "GET", s.clientURL+"/api/v1/sessions/"+sid+"/files/out/c.txt", sk, "", "")
	if r.status != 200 || string(r.body) != "at close\n" {
		t.Fatalf("the file written before close: %d %s", r.status, r.body)
	}
}

// sandboxKey returns a client key of a fresh profile allowing image as
// a remote sandbox.
func sandboxKey(t *testing.T, s *server, image string) string {
	t.Helper()
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "available_sandboxes": []string{image}})
	_, key := s.clientKey("k", pro)
	return key
}

// filesSession opens a session driven by the test whose file a.txt holds
// content; it returns the session's id and key.
func filesSession(t *testing.T, s *server, key, content string) (string, string) {
	t.Helper()
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	mustStatus(t, rawCall(t, "PUT", s.clientURL+"/api/v1/sessions/"+sid+"/files/a.txt", sk, "application/octet-stream", content), 200)
	return sid, sk
}

// sandboxExec runs command in the remote sandbox of session sid.
func sandboxExec(t *testing.T, s *server, sid, sk, command string) baton.ExecResult {
	t.Helper()
	res, _ := rpcResult(t, s, sid, sk, "session.execRemoteSandbox", map[string]any{"command": command})
	var out baton.ExecResult
	_ = json.Unmarshal(res, &out)
	return out
}

// TestExecutorShellFilesTwoSessions: one machine executor serves the
// remote sandboxes of two sessions with files at once; each sandbox's
// files are mounted in a directory of its own, and each sandbox's
// commands run there, seeing only its own session's files.
func TestExecutorShellFilesTwoSessions(t *testing.T) {
	onlySingleNode(t, "executor shells serve only the sessions of the node they are connected to")
	// Not parallel: it mounts a FUSE file system this process serves, and
	// another test's fork (os/exec) while a FUSE request is pending can
	// deadlock the process; serial tests run before the parallel ones.
	for _, mode := range []string{exsdk.MountSync, exsdk.MountFUSE} {
		t.Run(mode, func(t *testing.T) { twoSessionFiles(t, mode) })
	}
}

func twoSessionFiles(t *testing.T, mode string) {
	s := startServer(t)
	mch, secret := s.machine("two-" + mode)
	image := "executor:" + mch
	key := sandboxKey(t, s, image)
	type sess struct{ id, key, content, sandbox string }
	all := []*sess{{content: "first session\n"}, {content: "second session\n"}}
	for _, x := range all {
		x.id, x.key = filesSession(t, s, key, x.content)
	}
	root := t.TempDir()
	n := newExecNet(t, s)
	startSDKExecutor(t, n, exsdk.Config{
		Credential: secret, Scope: exsdk.Machine(mch), ExecutorID: "exe_two",
		Capabilities: exsdk.Capabilities{Process: &exsdk.ProcessCapability{}},
		Process:      &exsdk.Shell{Dir: t.TempDir()},
		Files:        &exsdk.FileMounts{Root: root, Mode: mode, SyncInterval: time.Hour},
	})
	for _, x := range all {
		frames := rpcAll(t, s, x.id, x.key, `{"jsonrpc":"2.0","id":1,"method":"session.startRemoteSandbox","params":{"image":"`+image+`"}}`)
		last := frames[len(frames)-1]
		if last.Error != nil && strings.Contains(string(last.raw), "mount_failed") && mode == exsdk.MountFUSE {
			t.Skipf("FUSE cannot mount here: %s", last.raw)
		}
		if last.Error != nil {
			t.Fatalf("start for %s: %s", x.id, last.raw)
		}
		var started struct {
			SandboxID string `json:"sandbox_id"`
		}
		_ = json.Unmarshal(last.Result, &started)
		x.sandbox = started.SandboxID
	}
	paths := map[string]string{}
	for _, m := range fsMounts(n) {
		paths[m.session] = m.path
	}
	want := map[string]string{}
	for _, x := range all {
		want[x.sandbox] = "/sessions/" + x.sandbox + "/workspace"
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Fatalf("fs.mount paths by sandbox (-want +got):\n%s", diff)
	}
	// Both sandboxes are up; each relative cat reads its own session's file.
	for _, x := range all {
		if got := sandboxExec(t, s, x.id, x.key, "cat a.txt"); got.Stdout != x.content || got.ExitCode != 0 {
			t.Errorf("cat a.txt in the sandbox of %s: %+v, want %q", x.id, got, x.content)
		}
		if got := sandboxExec(t, s, x.id, x.key, "pwd"); got.Stdout != filepath.Join(root, "sessions", x.sandbox, "workspace")+"\n" {
			t.Errorf("the sandbox of %s runs in %q", x.id, got.Stdout)
		}
	}
	// A write in one sandbox reaches its own session only.
	if got := sandboxExec(t, s, all[0].id, all[0].key, "echo only mine > b.txt"); got.ExitCode != 0 {
		t.Fatalf("write: %+v", got)
	}
	for _, x := range all {
		rpcResult(t, s, x.id, x.key, "session.stopRemoteSandbox", map[string]any{})
	}
	if r := rawCall(t, "GET", s.clientURL+"/api/v1/sessions/"+all[0].id+"/files/b.txt", all[0].key, "", ""); r.status != 200 || string(r.body) != "only mine\n" {
		t.Errorf("the write in its own session: %d %s", r.status, r.body)
	}
	if r := rawCall(t, "GET", s.clientURL+"/api/v1/sessions/"+all[1].id+"/files/b.txt", all[1].key, "", ""); r.status != 404 {
		t.Errorf("the write in the other session: %d %s", r.status, r.body)
	}
}

// TestBrainFilesEndToEnd: a brain's agent session gets its session's
// files mounted after its first turn.start (epoch of the turn, a token
// the file service takes), once; closing the session unmounts them with
// flush before session.close.
func TestBrainFilesEndToEnd(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
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
	if m.session != sess.ID || m.epoch != epoch || m.path != "/sessions/"+sess.ID+"/workspace" {
		t.Fatalf("fs.mount %+v, want session %s at the turn's epoch %d", m, sess.ID, epoch)
	}
	if !strings.Contains(b.net.read(), `"workspace_path":"`+m.path+`"`) {
		t.Errorf("turn.start does not name the workspace path %s", m.path)
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
