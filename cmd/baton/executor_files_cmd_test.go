//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/client/executor/executortest"
)

// TestExecutorCmdFilesConfig: [files] of executor.toml, its defaults and
// its errors.
func TestExecutorCmdFilesConfig(t *testing.T) {
	t.Parallel()
	c, err := parseExecConfig("x.toml", []byte("[files]\nroot = \"/srv/mnt\"\nmode = \"sync\"\nsync_interval = \"30s\"\nallow_other = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&execFiles{Root: "/srv/mnt", Mode: executor.MountSync, SyncInterval: 30 * time.Second, AllowOther: true}, c.Files); diff != "" {
		t.Errorf("[files] (-want +got):\n%s", diff)
	}
	if c, err = parseExecConfig("x.toml", []byte("[files]\n")); err != nil || c.Files == nil || *c.Files != (execFiles{Mode: executor.MountAuto}) {
		t.Errorf("empty [files]: %+v, %v", c, err)
	}
	if c, err = parseExecConfig("x.toml", nil); err != nil || c.Files != nil {
		t.Errorf("no [files]: %+v, %v", c.Files, err)
	}

	for _, tc := range []struct{ name, doc, want string }{
		{"mode", "[files]\nmode = \"nfs\"\n", `x.toml:2:1: files.mode: "nfs" must be "auto", "fuse" or "sync"`},
		{"sync interval", "[files]\nsync_interval = \"often\"\n", `x.toml:2:1: files.sync_interval: "often" is not a positive duration`},
		{"unknown key", "[files]\ndir = \"/x\"\n", `x.toml:2:1: unknown key "files.dir"`},
		{"root a number", "[files]\nroot = 1\n", "x.toml:2:8: cannot decode TOML integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseExecConfig("x.toml", []byte(tc.doc))
			var ce *configError
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %s", err, tc.want)
			}
		})
	}
	c, _ = parseExecConfig("x.toml", []byte("[[tools]]\nname = \"t\"\ncommand = [\"true\"]\n[files]\n"))
	if err := c.forScope(executor.ScopeEnvironment); err == nil || err.Error() != "x.toml:4:2: [files] is for machines (--machine), not environments" {
		t.Errorf("environment with [files]: %v", err)
	}
}

// TestExecutorCmdFiles: `baton executor --machine` with [files] declares
// capabilities.fs and serves fs.unmount; a relative root is taken from
// --work-dir.
func TestExecutorCmdFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), "[process]\n[files]\nroot = \"mnt\"\nmode = \"sync\"\n")

	check := runExecutorCmd(t, executorCredEnv(), "--machine", "mch_a", "--config", cfg, "--work-dir", dir, "--check")
	check.exit(t)
	if got, want := check.stdout.String(), "configuration ok: shell, session files (sync, below "+filepath.Join(dir, "mnt")+")\n"; got != want {
		t.Errorf("--check printed %q, want %q", got, want)
	}

	h := executortest.New(t)
	run := runExecutorCmd(t, executorCredEnv(), "--url", h.URL(), "--machine", "mch_a", "--config", cfg, "--work-dir", dir)
	c := run.conn(t, h)
	var reg struct {
		Capabilities struct {
			FS json.RawMessage `json:"fs"`
		} `json:"capabilities"`
	}
	executortest.Decode(t, c.Next(t, "executor.register").Params, &reg)
	if string(reg.Capabilities.FS) != `{"fuse":true}` {
		t.Errorf("capabilities.fs %s", reg.Capabilities.FS)
	}
	var res struct{ Status string }
	c.Result(t, "fs.unmount", map[string]any{"session_id": "sbx_1", "flush": true}, &res)
	if res.Status != "unmounted" {
		t.Errorf("fs.unmount answered %+v", res)
	}
}
