package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runDev runs `baton dev` in the current directory until the returned stop
// is called, and returns what it printed once listening.
func runDev(t *testing.T, env map[string]string) (banner *syncBuffer, clientURL, adminURL string, stop func() int) {
	t.Helper()
	out := &syncBuffer{}
	ready := make(chan [2]string, 1)
	c := &cli{getenv: envFunc(env), stdout: out, stderr: &syncBuffer{}, stdin: strings.NewReader(""),
		ready: func(cu, au string) { ready <- [2]string{cu, au} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- c.run(ctx, []string{"dev"}) }()
	select {
	case urls := <-ready:
		clientURL, adminURL = urls[0], urls[1]
	case code := <-done:
		cancel()
		t.Fatalf("dev exited with %d", code)
	}
	return out, clientURL, adminURL, func() int { cancel(); return <-done }
}

func TestDevFirstRunAndReuse(t *testing.T) {
	t.Chdir(t.TempDir())
	env := map[string]string{"BAE_ADDR": "127.0.0.1:0", "BAE_ADMIN_ADDR": "127.0.0.1:0"}
	banner, clientURL, adminURL, stop := runDev(t, env)
	keyB, err := os.ReadFile(filepath.Join("baton-data", "client-key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(keyB))
	// The banner is printed after the ready hook; stop waits for it.
	if code := stop(); code != 0 {
		t.Fatalf("dev exit %d", code)
	}
	for _, want := range []string{clientURL, adminURL, key, "go run ./cmd/baton chat --url " + clientURL,
		"go run ./cmd/baton admin sessions list --admin-addr " + adminURL} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}
	for _, f := range []string{"baton.db", "admin-key.pem", "client-key"} {
		fi, err := os.Stat(filepath.Join("baton-data", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", f, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat("baton-data"); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("baton-data mode %v, want 0700", fi.Mode().Perm())
	}

	// A second run reuses the profile and key, and the key works.
	_, clientURL, adminURL, stop = runDev(t, env)
	defer stop()
	adminKey, _ := os.ReadFile(filepath.Join("baton-data", "admin-key.pem"))
	r := call(t, "GET", adminURL+"/admin/v1/profiles", strings.TrimSpace(string(adminKey)), nil)
	mustStatus(t, r, 200)
	items := r.json(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["name"] != "default" || items[0].(map[string]any)["primary_provider"] != "scripted" {
		t.Fatalf("profiles after rerun: %s", r.body)
	}
	// The config snapshot names the providers dev added, as the registry does.
	r = call(t, "GET", adminURL+"/admin/v1/config", strings.TrimSpace(string(adminKey)), nil)
	mustStatus(t, r, 200)
	if !strings.Contains(string(r.body), `"entries":[{"name":"scripted","provider":"scripted"`) {
		t.Errorf("config snapshot lacks the scripted provider: %s", r.body)
	}
	r = call(t, "GET", adminURL+"/admin/v1/keys", strings.TrimSpace(string(adminKey)), nil)
	if n := len(r.json(t)["items"].([]any)); n != 1 {
		t.Fatalf("%d client keys after rerun, want 1", n)
	}
	b2, _ := os.ReadFile(filepath.Join("baton-data", "client-key"))
	if strings.TrimSpace(string(b2)) != key {
		t.Fatal("rerun minted a new client key")
	}
	r = call(t, "POST", clientURL+"/api/v1/sessions", key, map[string]any{"tools": []any{map[string]any{"name": "get_time"}}})
	mustStatus(t, r, 201)
}

func TestChatOfflineToolRoundTrip(t *testing.T) {
	t.Chdir(t.TempDir())
	env := map[string]string{"BAE_ADDR": "127.0.0.1:0", "BAE_ADMIN_ADDR": "127.0.0.1:0"}
	_, clientURL, _, stop := runDev(t, env)
	defer stop()
	var out, errb syncBuffer
	c := &cli{getenv: envFunc(map[string]string{}), stdout: &out, stderr: &errb,
		stdin: strings.NewReader("hello there\ncall get_time\ncall roll_dice {\"sides\": 2}\n/quit\n")}
	if code := c.run(context.Background(), []string{"chat", "--url", clientURL}); code != 0 {
		t.Fatalf("chat exit %d: %s\n%s", code, errb.String(), out.String())
	}
	got := out.String()
	for _, want := range []string{"→ get_time {}", "assistant: get_time returned: ", "→ roll_dice {\"sides\":2}", "roll_dice returned: ", "· provider.request"} {
		if !strings.Contains(got, want) {
			t.Errorf("chat output lacks %q:\n%s", want, got)
		}
	}
	// Each reply is shown once: as it streams, not again at the end.
	for _, reply := range []string{"assistant: You said: hello there\n", "assistant: get_time returned: "} {
		if n := strings.Count(got, reply); n != 1 {
			t.Errorf("%q shown %d times:\n%s", reply, n, got)
		}
	}
}
