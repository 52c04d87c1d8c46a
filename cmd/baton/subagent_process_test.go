//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client"
)

// TestProcessSandboxSubagentEnds runs remote subagents in a process
// sandbox with one slot per session: a subagent whose sandbox is stopped
// and one whose command cannot be started each end once, as failed, and
// free the slot for the next launch.
func TestProcessSandboxSubagentEnds(t *testing.T) {
	t.Parallel()
	rootfs := busyboxRootfs(t)
	s := startServer(t, func(env map[string]string) {
		env["BAE_SANDBOX_DRIVER"] = "process"
		env["BATON_SANDBOX_ROOTFS_DIR"] = rootfs
		env["BAE_MAX_SUBAGENTS_PER_SESSION"] = "1"
	})
	ctx := loopCtx(t)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "available_sandboxes": []string{"busybox"}})
	h, _ := loopHarness(t, s, pro)
	err := h.AddSubagentTool(client.SubagentConfig{RemoteImage: "busybox", Subagents: []client.SubagentDef{
		{Harness: "t5", Command: `sh -c "$(cat)" # {model}`, Timeout: 8 * time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// call has the model call tool and returns what the tool answered.
	call := func(tool, input string) string {
		t.Helper()
		r, err := sess.Send(ctx, "call "+tool+" "+input)
		if err != nil {
			t.Fatal(err)
		}
		text, ok := strings.CutPrefix(r.Message.Text(), tool+" returned: ")
		if !ok {
			t.Fatalf("reply %q", r.Message.Text())
		}
		return text
	}
	launch := func(prompt string) string {
		t.Helper()
		in, _ := json.Marshal(map[string]string{"harness": "t5", "model": "m", "prompt": prompt})
		text := call("launch_subagent", string(in))
		var started struct {
			ID     string `json:"subagent_id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(text), &started); err != nil || started.Status != "started" {
			t.Fatalf("launch: %s", text)
		}
		return started.ID
	}
	ends := map[string]string{} // subagent id → its terminal event
	waitEnd := func(id string) string {
		t.Helper()
		for ends[id] == "" {
			ev, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("no end of %s: %v", id, err)
			}
			switch ev.Type {
			case "session.subagent.completed", "session.subagent.failed", "session.subagent.cancelled":
				var p struct {
					ID string `json:"subagent_id"`
				}
				_ = json.Unmarshal(ev.Payload, &p)
				ends[p.ID] = ev.Type + " " + string(ev.Payload)
			}
		}
		return ends[id]
	}
	entry := func(id, status, exit, stdout, stderr, reason, detail string) string {
		return fmt.Sprintf(`{"detail":%s,"exit_code":%s,"harness":"t5","model":"m","reason":%s,"status":%q,"stderr":%s,"stdout":%s,"subagent_id":%q,"truncated":false}`,
			detail, exit, reason, status, stderr, stdout, id)
	}

	// Stopping the sandbox ends its subagent at once, as a killed command.
	if _, err := sess.StartRemoteSandbox(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	stopped := launch("echo begun; sleep 20")
	if _, err := sess.StopRemoteSandbox(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := call("remote_subagent_status", `{}`), `{"subagents":[`+entry(stopped, "failed", "-1", `""`, `""`, `"nonzero_exit"`, "null")+`]}`; got != want {
		t.Errorf("status after the stop = %s\nwant %s", got, want)
	}
	if _, err := sess.StartRemoteSandbox(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	done := launch("echo again") // the slot is free
	waitEnd(done)

	// A command the sandbox cannot start (no /bin/sh) fails to spawn.
	sh := filepath.Join(rootfs, "busybox", "bin", "sh")
	if err := os.Rename(sh, sh+".off"); err != nil {
		t.Fatal(err)
	}
	spawn := launch("echo never")
	spawnEnd := waitEnd(spawn)
	if err := os.Rename(sh+".off", sh); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Detail   string `json:"detail"`
		ExitCode *int   `json:"exit_code"`
		Reason   string `json:"reason"`
	}
	line, _ := strings.CutPrefix(spawnEnd, "session.subagent.failed ")
	if err := json.Unmarshal([]byte(line), &p); err != nil || p.Reason != "spawn_failed" || p.ExitCode != nil || !strings.Contains(p.Detail, "/bin/sh") {
		t.Errorf("end of the unstartable command: %s", spawnEnd)
	}
	last := launch("echo last") // the slot is free again
	waitEnd(last)
	waitEnd(stopped)

	// Each subagent has exactly one end.
	got := map[string][]string{}
	for _, ev := range sessionEvents(t, ctx, sess) {
		if strings.HasPrefix(ev.Type, "session.subagent.") {
			var p struct {
				ID string `json:"subagent_id"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			got[p.ID] = append(got[p.ID], strings.TrimPrefix(ev.Type, "session.subagent."))
		}
	}
	want := map[string][]string{
		stopped: {"start", "running", "failed"},
		done:    {"start", "running", "completed"},
		spawn:   {"start", "running", "failed"},
		last:    {"start", "running", "completed"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("subagent events (-want +got):\n%s", d)
	}
	stopEnd := `session.subagent.failed {"detail":null,"dispatch":"remote","exit_code":-1,"harness":"t5","model":"m","reason":"nonzero_exit","subagent_id":"` + stopped + `"}`
	if ends[stopped] != stopEnd {
		t.Errorf("end of the stopped subagent = %s\nwant %s", ends[stopped], stopEnd)
	}
	if ends[done] != `session.subagent.completed {"detail":null,"dispatch":"remote","exit_code":0,"harness":"t5","model":"m","subagent_id":"`+done+`"}` {
		t.Errorf("end of the second subagent = %s", ends[done])
	}
}
