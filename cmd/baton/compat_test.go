package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The BAE compatibility test runs BAE's own TypeScript SDK and its
// reference-assistant example, unchanged, against a Baton server. Nothing
// of BAE is kept in this repository: the test reads a checkout named by
// BATON_BAE_REPO (a relative path is taken from the repository root), for
// example one made with
//
//	git clone https://github.com/prettysmartdev/better-agent-engine .cache/bae
//	BATON_BAE_REPO=.cache/bae go test -run TestBAETypeScriptSDK -v ./cmd/baton
//
// (scripts/bae-compat.sh does both). It needs node >= 20 and npm; npm
// installs are cached under os.UserCacheDir()/baton-compat, keyed by the
// SDK's package-lock.json.

// compatTimeout bounds every npm run, nodeTimeout every node run (each
// check in sdk.mjs has its own shorter timeout).
const (
	compatTimeout = 5 * time.Minute
	nodeTimeout   = 2 * time.Minute
)

func TestBAETypeScriptSDK(t *testing.T) {
	t.Parallel()
	repo := os.Getenv("BATON_BAE_REPO")
	if repo == "" {
		t.Skip("BATON_BAE_REPO is not set: point it at a checkout of github.com/prettysmartdev/better-agent-engine " +
			"(git clone https://github.com/prettysmartdev/better-agent-engine .cache/bae), or run scripts/bae-compat.sh")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not on PATH")
	}
	// BAE's SDK wants node >= 20; `node --import tsx` needs 20.6.
	if v := compatNodeVersion(t, node); v[0] < 20 || v[0] == 20 && v[1] < 6 {
		t.Skipf("node %d.%d is older than 20.6", v[0], v[1])
	}
	if !filepath.IsAbs(repo) {
		// go test runs in cmd/baton; relative paths are from the repo root.
		repo = filepath.Join("..", "..", repo)
	}
	src, err := filepath.Abs(filepath.Join(repo, "client-typescript"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "package-lock.json")); err != nil {
		t.Fatalf("BATON_BAE_REPO=%s holds no client-typescript/package-lock.json: %v", repo, err)
	}
	sdk := compatPrepare(t, src, npm)

	s := startServer(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", compatTail(s.stderr.String(), 60))
		}
	})

	t.Run("sdk", func(t *testing.T) {
		name := "bae-sdk-compat"
		pro := s.profile(map[string]any{"name": name, "primary_provider": "script", "allowed_tools": []string{"get_time", "add", "run_shell_command"}})
		_, k1 := s.clientKey("sdk-1", pro)
		_, k2 := s.clientKey("sdk-2", pro)
		other := s.profile(map[string]any{"name": "bae-sdk-other", "primary_provider": "script", "allowed_tools": []string{}})
		_, ko := s.clientKey("sdk-other", other)
		script, err := filepath.Abs(filepath.Join("testdata", "compat", "sdk.mjs"))
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code := compatExec(t, sdk, []string{
			"BAE_SDK=" + filepath.Join(sdk, "dist", "index.js"),
			"BAE_SERVER_URL=" + s.clientURL,
			"BAE_CLIENT_KEY=" + k1,
			"BAE_CLIENT_KEY_2=" + k2,
			"BAE_OTHER_KEY=" + ko,
			"BAE_PROFILE_NAME=" + name,
		}, node, script)
		t.Logf("sdk.mjs output:\n%s", out)
		checks := 0
		for _, c := range compatChecks(out) {
			checks++
			if strings.HasPrefix(c, "FAIL ") {
				t.Errorf("BAE SDK %s", c)
			}
		}
		if !strings.Contains(out, "\ndone ") || checks == 0 || code != 0 {
			t.Errorf("sdk.mjs exited %d after %d checks; stderr:\n%s", code, checks, errOut)
		}
	})

	t.Run("reference-assistant", func(t *testing.T) {
		pro := s.profile(map[string]any{
			"name": "reference-assistant", "primary_provider": "script",
			"allowed_tools": []string{"get_current_time", "read_file", "write_file", "explore_files", "run_shell_command"},
		})
		_, key := s.clientKey("reference-assistant", pro)
		env := []string{
			"BAE_SERVER_URL=" + s.clientURL,
			"BAE_CLIENT_KEY=" + key,
			// The example insists that the provider key variable is set
			// locally; the scripted provider needs none.
			"BAE_PROVIDER_KEY_ENV=BATON_COMPAT_PROVIDER_KEY",
			"BATON_COMPAT_PROVIDER_KEY=unused",
			"BAE_SUBSCRIBE_DEMO=1",
		}
		// What `npm run example` does, with tsx loaded into node itself
		// so that a timeout kills one process, not a tree.
		mainTS := filepath.Join(sdk, "examples", "reference-assistant", "main.ts")

		t.Run("get_current_time", func(t *testing.T) {
			out, errOut, code := compatExec(t, sdk, env, node, "--import", "tsx", mainTS, "call get_current_time")
			if code != 0 {
				t.Fatalf("reference-assistant exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if !regexp.MustCompile(`^get_current_time returned: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\n$`).MatchString(out) {
				t.Errorf("stdout %q, want the tool's ISO time echoed by the scripted model", out)
			}
			for _, want := range []string{
				`on profile "reference-assistant"`,
				"before_tool_call get_current_time({})",
				"after_tool_call get_current_time -> ",
				"on_event tool call get_current_time (client)",
				"[subscribe] session opened",
				"[example] done — ",
			} {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
		})

		t.Run("file tools", func(t *testing.T) {
			ws := filepath.Join(sdk, "examples", "reference-assistant", "workspace")
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			ws, err := filepath.EvalSymlinks(ws)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(ws, "baton.txt")
			write, _ := json.Marshal(map[string]string{"path": file, "content": "written through Baton"})
			read, _ := json.Marshal(map[string]string{"path": file})
			prompt := "call write_file " + string(write) + "\ncall read_file " + string(read)
			out, errOut, code := compatExec(t, sdk, env, node, "--import", "tsx", mainTS, prompt)
			if code != 0 {
				t.Fatalf("reference-assistant exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			want := `write_file returned: {"path":` + compatJSON(file) + `,"bytes_written":21}` + "\n" +
				`read_file returned: {"path":` + compatJSON(file) + `,"content":"written through Baton"}` + "\n"
			if out != want {
				t.Errorf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", out, want, errOut)
			}
		})
	})
}

// compatPrepare copies client-typescript into a temp dir, links the cached
// node_modules for its package-lock.json into it and builds it with its own
// build script. It returns the copy's directory.
func compatPrepare(t *testing.T, src, npm string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "client-typescript")
	if err := compatCopy(src, dir); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	modules := compatModules(t, dir, npm)
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if out, err := compatRun(t, dir, nil, npm, "run", "build"); err != nil {
		t.Fatalf("npm run build: %v\n%s", err, out)
	}
	return dir
}

// compatModules returns a node_modules directory installed by `npm ci` from
// the package files in dir, reusing a cached one when the lock file, the
// platform and the node version match.
func compatModules(t *testing.T, dir, npm string) string {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	node, _ := exec.LookPath("node")
	h := sha256.New()
	h.Write(lock)
	h.Write(pkg)
	h.Write([]byte(runtime.GOOS + "/" + runtime.GOARCH + "/node" + strconv.Itoa(compatNodeVersion(t, node)[0])))
	key := hex.EncodeToString(h.Sum(nil))[:20]

	root := ""
	if c, err := os.UserCacheDir(); err == nil {
		root = filepath.Join(c, "baton-compat")
	}
	if root == "" || os.MkdirAll(root, 0o755) != nil {
		root = t.TempDir() // no usable cache: install for this run only
	}
	final := filepath.Join(root, key)
	if _, err := os.Stat(filepath.Join(final, "node_modules", ".package-lock.json")); err == nil {
		t.Logf("using cached npm install %s", final)
		return filepath.Join(final, "node_modules")
	}
	tmp, err := os.MkdirTemp(root, key+".tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for name, b := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("npm ci into %s", final)
	if out, err := compatRun(t, tmp, nil, npm, "ci", "--no-audit", "--no-fund"); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	// Publish atomically; a concurrent run that got there first wins. A
	// leftover without the marker is broken and goes.
	if _, err := os.Stat(filepath.Join(final, "node_modules", ".package-lock.json")); err != nil {
		os.RemoveAll(final)
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(filepath.Join(final, "node_modules", ".package-lock.json")); statErr != nil {
			t.Fatalf("cache npm install: %v", err)
		}
	}
	return filepath.Join(final, "node_modules")
}

// compatCopy copies the regular files and directories of src into dst,
// leaving out installed and built output.
func compatCopy(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && (d.Name() == "node_modules" || d.Name() == "dist" || d.Name() == "workspace"):
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// compatRun runs a command in dir with extra environment and returns its
// combined output.
func compatRun(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), compatTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// compatExec runs a node program in dir and returns stdout, stderr and the
// exit code.
func compatExec(t *testing.T, dir string, env []string, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run %s: %v", name, err)
	}
	return out.String(), errb.String(), code
}

// compatNodeVersion returns node's major and minor version.
func compatNodeVersion(t *testing.T, node string) [2]int {
	t.Helper()
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	var v [2]int
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 3)
	for i := 0; i < len(v) && i < len(parts); i++ {
		v[i], _ = strconv.Atoi(parts[i])
	}
	return v
}

// compatChecks returns the "ok …" and "FAIL …" reports of sdk.mjs, each with
// its indented continuation lines.
func compatChecks(out string) []string {
	var checks []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ok "), strings.HasPrefix(line, "FAIL "):
			checks = append(checks, line)
		case strings.HasPrefix(line, "    ") && len(checks) > 0:
			checks[len(checks)-1] += "\n" + line
		}
	}
	return checks
}

func compatJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// compatTail returns the last n lines of s.
func compatTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
