package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/client"
	bexec "github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/executor"
	"github.com/baton-engine/baton/executor/proto"
	"github.com/baton-engine/baton/filearea"
	"github.com/baton-engine/baton/store"
	"github.com/google/go-cmp/cmp"
)

// filesWait bounds every step of the file tests; a guard, not a sleep.
const filesWait = 30 * time.Second

// TestSessionFilesEndToEnd drives a real server through the Go SDKs:
// session files with the client SDK, an artifact uploaded with an
// executor token and downloaded by the client, and a machine executor
// (package client/executor) writing into its mounted view of the
// session's files — synced, and through FUSE where it can mount — for
// the client to read back through /api/v1/sessions/{id}/files.
func TestSessionFilesEndToEnd(t *testing.T) {
	// Not parallel: it mounts a FUSE file system this process serves, and
	// another test's fork (os/exec) while a FUSE request is pending can
	// deadlock the process; serial tests run before the parallel ones.
	s := startServer(t, func(env map[string]string) {
		env["BATON_MAX_FILE_BYTES"] = "4096"
		env["BATON_MAX_ARTIFACT_BYTES"] = "64"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*filesWait)
	defer cancel()
	envID, envSecret, _ := s.environment("tools")
	machineID, machineSecret := s.machine("box")
	profile := s.profile(map[string]any{"name": "files", "primary_provider": "script", "executor_environments": []string{envID}})
	_, key := s.clientKey("files", profile)
	sess, err := client.NewHarness(client.Config{BaseURL: s.clientURL, ClientKey: key}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.WithoutCancel(ctx))

	t.Run("client", func(t *testing.T) {
		info, err := sess.WriteFile(ctx, "notes/todo.md", []byte("- write tests\n"))
		if err != nil {
			t.Fatal(err)
		}
		if info.Path != "notes/todo.md" || info.Size != 14 || info.SHA256 != filearea.Digest([]byte("- write tests\n")) {
			t.Errorf("WriteFile = %+v", info)
		}
		if b, err := sess.ReadFile(ctx, "notes/todo.md"); err != nil || string(b) != "- write tests\n" {
			t.Errorf("ReadFile = %q, %v", b, err)
		}
		entries, err := sess.ListFiles(ctx, "", false)
		if err != nil || len(entries) != 1 || entries[0].Path != "notes" || !entries[0].IsDir() {
			t.Errorf("ListFiles = %+v, %v", entries, err)
		}
		var apiErr *client.APIError
		if _, err := sess.WriteFile(ctx, "big", make([]byte, 4097)); !errors.As(err, &apiErr) || apiErr.Status != 413 {
			t.Errorf("over BATON_MAX_FILE_BYTES: %v", err)
		}
		r := rawCall(t, "GET", s.clientURL+"/api/v1/sessions/"+sess.ID+"/files/notes/%2e%2e/%2e%2e/x", sess.Key, "", "")
		mustStatus(t, r, 400)
		if err := sess.DeleteFile(ctx, "notes/todo.md"); err != nil {
			t.Fatal(err)
		}
		if _, err := sess.ReadFile(ctx, "notes/todo.md"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
			t.Errorf("read after delete: %v", err)
		}
	})

	t.Run("artifact", func(t *testing.T) {
		tok := s.exchange("/v1/environments/"+envID+"/token", envSecret).Token
		up := func(body string) *response {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.clientURL+"/v1/environments/"+envID+"/artifacts", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("Artifact-Name", "build.log")
			return do(t, req)
		}
		r := up("compiled 3 packages\n")
		mustStatus(t, r, 201)
		id, _ := r.json(t)["artifact_id"].(string)
		a, err := sess.Artifact(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&client.Artifact{ID: id, Name: "build.log", MediaType: "text/plain",
			SHA256: filearea.Digest([]byte("compiled 3 packages\n")), Content: []byte("compiled 3 packages\n")}, a); diff != "" {
			t.Errorf("Artifact (-want +got):\n%s", diff)
		}
		v1Error(t, up(strings.Repeat("x", 65)), 413, "invalid_request", "artifact is larger than 64 bytes")
	})

	for _, mode := range []string{bexec.MountSync, bexec.MountFUSE} {
		t.Run("mount/"+mode, func(t *testing.T) {
			mountRoundTrip(t, ctx, s, sess, machineID, machineSecret, mode)
		})
	}
}

// do sends req and reads the answer.
func do(t testing.TB, req *http.Request) *response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

// mountRoundTrip binds the session to a machine executor through a hub of
// the test's own (sharing the server's store, so the server's tokens
// verify), sends fs.mount with views minted for the binding's epoch, and
// checks both directions: a file the client wrote is in the mount, and a
// file the executor writes there reaches the client.
func mountRoundTrip(t *testing.T, ctx context.Context, s *server, sess *client.Session, machineID, secret, mode string) {
	db, err := store.Open(ctx, store.Options{URL: s.storeURL(), SharedFile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tokens, err := auth.OpenExecutorTokens(ctx, auth.ExecutorOptions{Store: db, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	views, err := auth.OpenViewTokens(ctx, auth.ViewTokenOptions{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	hub, err := executor.Open(executor.Options{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close(context.WithoutCancel(ctx))
	// The executor connects to the test's hub and exchanges its credential
	// at the server.
	origin, _ := url.Parse(s.clientURL)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/executors/connect", hub)
	mux.Handle("/", httputil.NewSingleHostReverseProxy(origin))
	front := httptest.NewServer(mux)
	defer front.Close()

	if _, err := sess.WriteFile(ctx, "in/brief.txt", []byte("from the client")); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	e, err := bexec.New(bexec.Config{
		BaseURL: front.URL, Credential: secret, Scope: bexec.Machine(machineID),
		Capabilities: bexec.Capabilities{Process: &bexec.ProcessCapability{}},
		Files:        &bexec.FileMounts{Root: root, Mode: mode, SyncInterval: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.WithoutCancel(ctx))
	b, err := hub.Assign(ctx, executor.Target{MachineID: machineID, Capability: executor.CapabilityProcess},
		executor.Assignment{SessionID: sess.ID, Metadata: proto.AssignMetadata{Source: proto.SourceHarness}})
	if err != nil {
		t.Fatal(err)
	}
	minter := &executor.Minter{Origin: s.clientURL, Tokens: views}
	mounted, err := minter.Mount(ctx, b)
	if err != nil {
		if mode == bexec.MountFUSE && strings.Contains(err.Error(), "mount_failed") {
			t.Skipf("FUSE cannot mount here: %v", err)
		}
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"workspace"}, mounted); diff != "" {
		t.Errorf("mounted (-want +got):\n%s", diff)
	}
	dir := filepath.Join(root, "sessions", sess.ID, "workspace") // the binding's own directory
	if got, err := os.ReadFile(filepath.Join(dir, "in/brief.txt")); err != nil || string(got) != "from the client" {
		t.Errorf("the client's file in the mount: %q, %v", got, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out/result.txt"), []byte("from the executor"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A synced directory uploads at fs.unmount with flush; FUSE wrote
	// through on close already.
	uctx, cancel := context.WithTimeout(ctx, filesWait)
	defer cancel()
	if err := b.Unmount(uctx, true); err != nil {
		t.Fatal(err)
	}
	if got, err := sess.ReadFile(ctx, "out/result.txt"); err != nil || string(got) != "from the executor" {
		t.Errorf("the executor's file through the client API: %q, %v", got, err)
	}
	if err := sess.DeleteFile(ctx, "out/result.txt"); err != nil {
		t.Fatal(err)
	}
	if err := sess.DeleteFile(ctx, "in/brief.txt"); err != nil {
		t.Fatal(err)
	}
}
