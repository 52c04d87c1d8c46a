package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/adminapi/adminclient"
)

func TestAdminConnectionFailure(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	code, _, errs := runAdmin(t, map[string]string{"BAE_ADMIN_TOKEN": "t"}, "--admin-addr", addr, "profiles", "list")
	want := "baton: could not connect to admin API at http://" + addr + " — is baton running? ("
	if code != exitRuntime || !strings.HasPrefix(errs, want) {
		t.Errorf("exit %d, stderr %q; want prefix %q", code, errs, want)
	}
}

func TestAdminAddrPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		flag string
		env  string
		want string
	}{
		{"default", "", "", "http://127.0.0.1:8081"},
		{"env", "", "10.1.1.1:9", "http://10.1.1.1:9"},
		{"flag beats env", "https://h:1", "10.1.1.1:9", "https://h:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &adminCLI{c: &cli{getenv: func(k string) string {
				if k == "BAE_ADMIN_ADDR" {
					return tt.env
				}
				return ""
			}}, addr: tt.flag, token: "t"}
			cl, err := a.client()
			if err != nil || cl.base != tt.want {
				t.Errorf("base = %v, %v; want %q", cl, err, tt.want)
			}
		})
	}
}

// TestAdminAddrUsed checks that flag and env addresses reach the server, in
// both forms.
func TestAdminAddrUsed(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("GET /admin/v1/providers", reply(200, `{"items":[]}`))
	bad := "127.0.0.1:1" // nothing listens there
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"BAE_ADMIN_ADDR": f.addr()}, nil},
		{map[string]string{"BAE_ADMIN_ADDR": f.srv.URL + "/"}, nil},
		{map[string]string{"BAE_ADMIN_ADDR": bad}, []string{"--admin-addr", f.addr()}},
		{map[string]string{"BAE_ADMIN_ADDR": bad}, []string{"--admin-addr", f.srv.URL}},
	} {
		tc.env["BAE_ADMIN_TOKEN"] = "t"
		code, _, errs := runAdmin(t, tc.env, append(tc.args, "providers")...)
		mustOK(t, code, errs)
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("requests = %d, want 4", n)
	}
}

// skipIfDefaultKey skips tests that need BAE's default key file absent.
func skipIfDefaultKey(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(defaultKeyFile); err == nil {
		t.Skipf("%s exists on this machine", defaultKeyFile)
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAdminTokenPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flagFile := writeFile(t, filepath.Join(dir, "flag.pem"), "  from-flag-file\n")
	envFile := writeFile(t, filepath.Join(dir, "env.pem"), "from-env-file\n")
	probe1 := writeFile(t, filepath.Join(dir, "dev", "admin-key.pem"), "from-probe-1\n")
	probe2 := writeFile(t, filepath.Join(dir, "var", "admin-key.pem"), "from-probe-2\n")
	emptyProbe := writeFile(t, filepath.Join(dir, "empty.pem"), "\n")
	missing := filepath.Join(dir, "missing.pem")
	all := map[string]string{"BAE_ADMIN_TOKEN": "from-env", "BAE_ADMIN_KEY_FILE": envFile}

	tests := []struct {
		name       string
		flagToken  string
		flagFile   string
		env        map[string]string
		probes     []string
		want, from string
	}{
		{"flag token first", "from-flag", flagFile, all, []string{probe1}, "from-flag", "--admin-token"},
		{"env token", "", flagFile, all, []string{probe1}, "from-env", "BAE_ADMIN_TOKEN"},
		{"empty env token ignored", "", flagFile, map[string]string{"BAE_ADMIN_TOKEN": " ", "BAE_ADMIN_KEY_FILE": envFile}, nil, "from-flag-file", flagFile},
		{"flag file, trimmed", "", flagFile, map[string]string{"BAE_ADMIN_KEY_FILE": envFile}, []string{probe1}, "from-flag-file", flagFile},
		{"env file", "", "", map[string]string{"BAE_ADMIN_KEY_FILE": envFile}, []string{probe1}, "from-env-file", envFile},
		{"first probe", "", "", nil, []string{probe1, probe2}, "from-probe-1", probe1},
		{"missing probe skipped", "", "", nil, []string{missing, probe2}, "from-probe-2", probe2},
		{"empty probe skipped", "", "", nil, []string{emptyProbe, probe2}, "from-probe-2", probe2},
		{"nothing", "", "", nil, []string{missing}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &adminCLI{
				c:       &cli{getenv: func(k string) string { return tt.env[k] }},
				token:   tt.flagToken,
				keyFile: tt.flagFile,
				probes:  tt.probes,
			}
			tok, from, _, err := a.resolveToken()
			if err != nil || tok != tt.want || from != tt.from {
				t.Errorf("resolveToken = %q from %q, %v; want %q from %q", tok, from, err, tt.want, tt.from)
			}
		})
	}
}

func TestAdminTokenFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	empty := writeFile(t, filepath.Join(dir, "empty.pem"), " \n")
	f := newFakeAdmin(t)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag file missing", nil, []string{"--admin-key-file", missing}, "read admin key file (--admin-key-file)"},
		{"env file missing", map[string]string{"BAE_ADMIN_KEY_FILE": missing}, nil, "read admin key file (BAE_ADMIN_KEY_FILE)"},
		{"flag file empty", nil, []string{"--admin-key-file", empty}, "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BAE_ADMIN_ADDR": f.addr()}
			for k, v := range tt.env {
				env[k] = v
			}
			code, _, errs := runAdmin(t, env, append(tt.args, "providers")...)
			if code != exitRuntime || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 with %q", code, errs, tt.want)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("sent %d requests despite the key file error", n)
	}
}

// TestAdminTokenSent checks each token source end to end, including the
// `baton dev` key file in the working directory.
func TestAdminTokenSent(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	skipIfDefaultKey(t)
	f := newFakeAdmin(t)
	f.handle("GET /admin/v1/providers", reply(200, `{"items":[]}`))
	keyFile := writeFile(t, filepath.Join(dir, "k.pem"), "from-file\n")
	base := map[string]string{"BAE_ADMIN_ADDR": f.addr()}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for k, v := range base {
			m[k] = v
		}
		return m
	}

	runs := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{base, []string{"--admin-token", "from-flag"}, "Bearer from-flag"},
		{with("BAE_ADMIN_TOKEN", "from-env"), []string{"--admin-key-file", keyFile}, "Bearer from-env"},
		{base, []string{"--admin-key-file", keyFile}, "Bearer from-file"},
		{with("BAE_ADMIN_KEY_FILE", keyFile), nil, "Bearer from-file"},
		{base, nil, ""}, // no key anywhere: no header
	}
	for _, r := range runs {
		code, _, errs := runAdmin(t, r.env, append(r.args, "providers")...)
		mustOK(t, code, errs)
	}
	writeFile(t, filepath.Join(dir, "baton-data", "admin-key.pem"), "bae_admin_dev\n")
	code, _, errs := runAdmin(t, base, "providers")
	mustOK(t, code, errs)

	var got []string
	for _, r := range f.requests() {
		got = append(got, r.Auth)
	}
	want := []string{"Bearer from-flag", "Bearer from-env", "Bearer from-file", "Bearer from-file", "", "Bearer bae_admin_dev"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Authorization headers (-want +got):\n%s", d)
	}
}

func TestAdminDefaultKeyUnreadableNoted(t *testing.T) {
	t.Parallel()
	// A directory cannot be read as a file, even by root.
	dir := t.TempDir()
	a := &adminCLI{c: &cli{getenv: func(string) string { return "" }}, probes: []string{dir}}
	tok, _, note, err := a.resolveToken()
	if err != nil || tok != "" || !strings.Contains(note, "could not read "+dir) {
		t.Fatalf("resolveToken = %q, note %q, %v", tok, note, err)
	}
	c := &adminClient{base: "http://x:1", note: note}
	msg := c.apiError(401, []byte(`{"type":"unauthorized","detail":"missing Authorization header"}`)).Error()
	if !strings.Contains(msg, "could not read "+dir) {
		t.Errorf("unauthorized message lacks the note:\n%s", msg)
	}
}

func FuzzAdminResponse(f *testing.F) {
	f.Add(401, []byte(`{"type":"unauthorized","title":"Unauthorized","status":401,"detail":"invalid admin key"}`))
	f.Add(409, []byte(`{"type":"profile_in_use","detail":"x"}`))
	f.Add(422, []byte("Failed to deserialize"))
	f.Add(404, []byte(""))
	f.Add(200, []byte(`{"items":[{"id":"a"}],"next_cursor":"1"}`))
	f.Add(200, []byte(`{"items":null}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		c := &adminClient{base: "http://127.0.0.1:8081"}
		if err := c.apiError(status, body); err == nil || err.Error() == "" {
			t.Fatalf("apiError(%d, %q) gave no message", status, body)
		}
		var p adminclient.Page
		if json.Unmarshal(body, &p) == nil {
			for _, it := range p.Items {
				rowOf(profileRow)(it)
				rowOf(eventRow)(it)
			}
		}
	})
}
