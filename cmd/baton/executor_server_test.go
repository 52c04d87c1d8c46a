//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// executorOwner creates an environment or a machine ("environments",
// "machines") with a credential on s and returns its id and secret.
func executorOwner(t *testing.T, s *server, kind string) (string, string) {
	t.Helper()
	r := s.admin("POST", "/admin/v1/"+kind, map[string]any{"name": fmt.Sprintf("cmd-%d", profileSeq.Add(1))})
	mustStatus(t, r, 201)
	id := r.json(t)["id"].(string)
	r = s.admin("POST", "/admin/v1/"+kind+"/"+id+"/credentials", nil)
	mustStatus(t, r, 201)
	return id, r.json(t)["secret"].(string)
}

// TestExecutorCmdRealServer runs `baton executor` against a real
// `baton serve` on the scripted model: an environment executor's command
// tool in a session's turn, and a machine's builtin brain running a
// whole turn through the server's model gateway and its shell.
func TestExecutorCmdRealServer(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	s := startServer(t)
	env, envSecret := executorOwner(t, s, "environments")
	mch, mchSecret := executorOwner(t, s, "machines")
	tools := writeFile(t, filepath.Join(t.TempDir(), "tools.toml"), e2eTools)
	brain := writeFile(t, filepath.Join(t.TempDir(), "brain.toml"), "[process]\n[agent]\nsystem = \"be brief\"\n")
	envRun := runExecutorCmd(t, map[string]string{envExecutorCredential: envSecret},
		"--url", s.clientURL, "--environment", env, "--config", tools, "--work-dir", t.TempDir())
	mchRun := runExecutorCmd(t, map[string]string{envExecutorCredential: mchSecret},
		"--url", s.clientURL, "--machine", mch, "--config", brain, "--work-dir", t.TempDir())
	waitClosed(t, envRun.stderr.seen("executor registered"), "the environment executor's registration")
	waitClosed(t, mchRun.stderr.seen("executor registered"), "the machine executor's registration")

	// The environment's tool, called by the scripted model in a turn.
	hands := loopProfile(t, s, map[string]any{"primary_provider": "script", "executor_environments": []string{env}})
	h, _ := loopHarness(t, s, hands)
	sess, err := h.Connect(loopCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	reply, err := sess.Send(loopCtx(t), `call upper {"text":"from a session"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Message.Text(); got != "upper returned: FROM A SESSION" {
		t.Errorf("reply %q", got)
	}

	// The machine's brain runs the turn: its model calls go through the
	// server's gateway (the profile's scripted model), its run_command
	// runs on the machine.
	brainProfile := loopProfile(t, s, map[string]any{"primary_provider": "script",
		"brain": map[string]any{"type": "executor", "machine_id": mch}})
	h, _ = loopHarness(t, s, brainProfile)
	sess, err = h.Connect(loopCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	reply, err = sess.Send(loopCtx(t), `call run_command {"command":"echo brain-$((6*7))"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Message.Text(); !strings.Contains(got, "run_command returned: brain-42") {
		t.Errorf("brain reply %q", got)
	}

	envRun.cancel()
	mchRun.cancel()
	if code := envRun.exit(t); code != 0 {
		t.Errorf("environment executor exit code %d:\n%s", code, envRun.stderr)
	}
	if code := mchRun.exit(t); code != 0 {
		t.Errorf("machine executor exit code %d:\n%s", code, mchRun.stderr)
	}
}
