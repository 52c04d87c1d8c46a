package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-engine/baton/config"
)

func runLoadgen(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPrintConfigIsLoadable(t *testing.T) {
	code, out, _ := runLoadgen(t, "-print-config", "-mock-addr", "127.0.0.1:19999")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	path := filepath.Join(t.TempDir(), "bae-config.toml")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, out)
	}
	reg := f.Registry()
	mock, ok := reg.Provider(mockProvider)
	if !ok || mock.Provider != "anthropic" || mock.BaseURL != "http://127.0.0.1:19999" || mock.AuthToken == "" {
		t.Fatalf("mock entry %+v (found %v)", mock, ok)
	}
	if s, ok := reg.Provider(scriptedProvider); !ok || s.Provider != "scripted" {
		t.Fatalf("scripted entry %+v (found %v)", s, ok)
	}
}

func TestNoURLExplainsAndStartsNothing(t *testing.T) {
	code, out, errs := runLoadgen(t)
	if code != 2 || out != "" || !strings.Contains(errs, "-print-config") || !strings.Contains(errs, "go run ./cmd/baton serve") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestFlagChecks(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "admin-key.pem")
	if err := os.WriteFile(keyFile, []byte("bae_admin_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"-url", "http://127.0.0.1:1"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no admin url", nil, "-admin-url is required"},
		{"both keys", []string{"-admin-url", "http://a", "-admin-key", "k", "-admin-key-file", keyFile}, "exclusive"},
		{"zero sessions", []string{"-admin-url", "http://a", "-sessions", "0"}, "at least 1"},
		{"missing key file", []string{"-admin-url", "http://a", "-admin-key-file", keyFile + ".nope"}, "admin key"},
		{"stray argument", []string{"-admin-url", "http://a", "extra"}, "unexpected arguments"},
		{"node url without scheme", []string{"-url", "http://127.0.0.1:1,127.0.0.1:2", "-admin-url", "http://a"}, "not a client origin"},
		{"pids for fewer nodes", []string{"-url", "http://127.0.0.1:1,http://127.0.0.1:2", "-admin-url", "http://a", "-server-pid", "7"}, "1 process ids for 2 URLs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runLoadgen(t, append(base, tc.args...)...)
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errs, tc.want)
			}
		})
	}
	o := options{url: "http://127.0.0.1:1", adminURL: "http://a", adminKeyFile: keyFile, sessions: 1, roundTrips: 1, perTurn: 1, timeout: 1, scripted: true}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if o.adminKey != "bae_admin_x" || o.provider != scriptedProvider {
		t.Fatalf("check filled key %q provider %q", o.adminKey, o.provider)
	}
}

func TestStartProfile(t *testing.T) {
	stop, err := startProfile("")
	if err != nil || stop() != nil {
		t.Fatalf("no profile: %v", err)
	}
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if stop, err = startProfile(path); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile file: %v, %v", fi, err)
	}
	if _, err := startProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil {
		t.Fatal("profile in a missing directory started")
	}
}
