package auth

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

type bootFixture struct {
	keys *fakeKeys
	log  *logRecorder
	opts BootstrapOptions
	dir  string
}

func newBoot(t *testing.T) *bootFixture {
	t.Helper()
	dir := t.TempDir()
	log := &logRecorder{}
	return &bootFixture{
		keys: newFakeKeys(),
		log:  log,
		dir:  dir,
		opts: BootstrapOptions{
			KeyFile:  filepath.Join(dir, "state", "admin-key.pem"),
			HashFile: filepath.Join(dir, "admin-key-hash.pem"),
			Logger:   slog.New(log),
			hash:     cheapHash,
		},
	}
}

func (b *bootFixture) run(t *testing.T) error {
	t.Helper()
	return Bootstrap(context.Background(), b.keys, b.opts)
}

var keyFileRE = regexp.MustCompile(`^bae_admin_[0-9a-f]{48}\n$`)

// readKeyFile returns the key file's plaintext after checking its shape
// and mode.
func readKeyFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !keyFileRE.Match(data) {
		t.Fatalf("key file holds %q", data)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", st.Mode().Perm())
	}
	return strings.TrimSuffix(string(data), "\n")
}

// checkGenerated asserts the one active admin row is a bootstrap key whose
// plaintext is in the key file, and returns that plaintext.
func (b *bootFixture) checkGenerated(t *testing.T) string {
	t.Helper()
	plain := readKeyFile(t, b.opts.KeyFile)
	rows := b.keys.active(baton.RoleAdmin)
	if len(rows) != 1 {
		t.Fatalf("%d active admin rows, want 1", len(rows))
	}
	k := rows[0]
	if k.Name != "bootstrap-admin" || k.Prefix != plain[:8] || k.Prefix != "bae_admi" || k.Role != baton.RoleAdmin ||
		!strings.HasPrefix(k.ID, baton.PrefixKey) || k.CreatedAt.IsZero() {
		t.Fatalf("admin row = %+v", k)
	}
	if strings.Contains(k.Hash, plain) {
		t.Fatal("plaintext stored")
	}
	a := New(Options{Keys: b.keys})
	if err := a.AdminKey(context.Background(), plain); err != nil {
		t.Fatalf("generated key does not verify: %v", err)
	}
	return plain
}

func TestBootstrapDisabled(t *testing.T) {
	b := newBoot(t)
	b.opts.Disabled = true
	if err := b.run(t); err != nil {
		t.Fatal(err)
	}
	if len(b.keys.active(baton.RoleAdmin)) != 0 {
		t.Fatal("admin row created with auth disabled")
	}
	if _, err := os.Stat(b.opts.KeyFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("key file written with auth disabled: %v", err)
	}
	if got := b.log.messages(); !slices.Equal(got, []string{"WARN admin API authentication is DISABLED"}) {
		t.Fatalf("logs = %q", got)
	}

	b.opts.Rotate = true
	if err := b.run(t); err == nil {
		t.Fatal("rotate with disabled auth accepted")
	}
}

func TestBootstrapSelfGenerate(t *testing.T) {
	b := newBoot(t)
	if err := b.run(t); err != nil {
		t.Fatal(err)
	}
	b.checkGenerated(t)
	st, err := os.Stat(filepath.Dir(b.opts.KeyFile))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("created key directory: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	if got := b.log.messages(); !slices.Equal(got, []string{"INFO no admin key found; generated new admin key, written to file"}) {
		t.Fatalf("logs = %q", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(b.opts.KeyFile))
	if len(entries) != 1 {
		t.Fatalf("key directory holds %d entries, want only the key file (no temporaries)", len(entries))
	}
}

func TestBootstrapOverwritesStaleKeyFile(t *testing.T) {
	b := newBoot(t)
	if err := os.MkdirAll(filepath.Dir(b.opts.KeyFile), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := "bae_admin_" + strings.Repeat("0", 48) + "\n"
	if err := os.WriteFile(b.opts.KeyFile, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.run(t); err != nil {
		t.Fatal(err)
	}
	plain := b.checkGenerated(t) // also checks mode 0600
	if plain+"\n" == stale {
		t.Fatal("stale key file trusted")
	}
}

func TestBootstrapActiveRowExists(t *testing.T) {
	b := newBoot(t)
	addAdmin(t, b.keys, "existing")
	if err := os.MkdirAll(filepath.Dir(b.opts.KeyFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.opts.KeyFile, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeHashFile(t, b.opts.HashFile, `{"key_hash":"`+mustCheapHash(t, "p")+`","prefix":"bae_admin_abcd"}`)
	if err := b.run(t); err != nil {
		t.Fatal(err)
	}
	rows := b.keys.active(baton.RoleAdmin)
	if len(rows) != 1 || rows[0].Name != "existing" {
		t.Fatalf("admin rows = %+v", rows)
	}
	data, _ := os.ReadFile(b.opts.KeyFile)
	st, _ := os.Stat(b.opts.KeyFile)
	if string(data) != "untouched" || st.Mode().Perm() != 0o644 {
		t.Fatalf("key file changed: %q %v", data, st.Mode().Perm())
	}
	if got := b.log.messages(); len(got) != 0 {
		t.Fatalf("logs = %q, want none", got)
	}
}

func writeHashFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestBootstrapIngestHashFile(t *testing.T) {
	for _, tt := range []struct {
		name, extra, wantName string
	}{
		{"default name", ``, "provisioned-admin"},
		{"empty name", `,"name":""`, ""}, // as BAE: kept as written
		{"explicit name", `,"name":"ops"`, "ops"},
		{"unknown fields ignored", `,"comment":"x"`, "provisioned-admin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBoot(t)
			plain := baton.NewSecret(baton.AdminKeyPrefix)
			hash := mustCheapHash(t, plain)
			writeHashFile(t, b.opts.HashFile, `{"key_hash":"`+hash+`","prefix":"bae_admin_abcd"`+tt.extra+`}`)
			if err := b.run(t); err != nil {
				t.Fatal(err)
			}
			rows := b.keys.active(baton.RoleAdmin)
			if len(rows) != 1 {
				t.Fatalf("%d admin rows", len(rows))
			}
			k := rows[0]
			if k.Hash != hash || k.Prefix != "bae_admin_abcd" || k.Name != tt.wantName || k.Role != baton.RoleAdmin {
				t.Fatalf("row = %+v", k)
			}
			if _, err := os.Stat(b.opts.KeyFile); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("key file written on ingest: %v", err)
			}
			if got := b.log.messages(); !slices.Equal(got, []string{"INFO admin key hash loaded from pre-provisioned file"}) {
				t.Fatalf("logs = %q", got)
			}
			if err := New(Options{Keys: b.keys}).AdminKey(context.Background(), plain); err != nil {
				t.Fatalf("provisioned key does not verify: %v", err)
			}
		})
	}
}

func TestBootstrapBadHashFile(t *testing.T) {
	good := mustCheapHash(t, "p")
	tests := map[string]string{
		"not json":        `key_hash = "x"`,
		"truncated json":  `{"key_hash":`,
		"wrong types":     `{"key_hash":1,"prefix":"p"}`,
		"missing hash":    `{"prefix":"bae_admin_abcd"}`,
		"empty hash":      `{"key_hash":"","prefix":"bae_admin_abcd"}`,
		"missing prefix":  `{"key_hash":"` + good + `"}`,
		"empty prefix":    `{"key_hash":"` + good + `","prefix":""}`,
		"argon2i":         `{"key_hash":"` + strings.Replace(good, "argon2id", "argon2i", 1) + `","prefix":"p"}`,
		"no salt":         `{"key_hash":"$argon2id$v=19$m=64,t=1,p=1$$abcdabcd","prefix":"p"}`,
		"not phc":         `{"key_hash":"sha256:abcd","prefix":"p"}`,
		"trailing data":   `{"key_hash":"` + good + `","prefix":"p"} x`,
		"json null hash":  `{"key_hash":null,"prefix":"p"}`,
		"blank prefix":    `{"key_hash":"` + good + `","prefix":"  "}`,
		"blank hash":      `{"key_hash":" ","prefix":"p"}`,
		"null name":       `{"key_hash":"` + good + `","prefix":"p","name":null}`,
		"number name":     `{"key_hash":"` + good + `","prefix":"p","name":7}`,
		"array not table": `[]`,
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBoot(t)
			writeHashFile(t, b.opts.HashFile, content)
			err := b.run(t)
			if !errors.Is(err, ErrBadHashFile) {
				t.Fatalf("Bootstrap = %v, want ErrBadHashFile", err)
			}
			if n := len(b.keys.active(baton.RoleAdmin)); n != 0 {
				t.Fatalf("%d admin rows stored from a bad hash file", n)
			}
			if _, err := os.Stat(b.opts.KeyFile); !errors.Is(err, fs.ErrNotExist) {
				t.Fatal("fell back to self-generation")
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		b := newBoot(t)
		b.opts.HashFile = b.dir // a directory cannot be read as a file
		if err := b.run(t); !errors.Is(err, ErrBadHashFile) {
			t.Fatalf("Bootstrap = %v, want ErrBadHashFile", err)
		}
	})
}

func TestBootstrapRotate(t *testing.T) {
	b := newBoot(t)
	old, oldPlain := addAdmin(t, b.keys, "bootstrap-admin")
	if err := os.MkdirAll(filepath.Dir(b.opts.KeyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.opts.KeyFile, []byte(oldPlain+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The hash file is ignored by rotation.
	writeHashFile(t, b.opts.HashFile, `{"key_hash":"`+mustCheapHash(t, "p")+`","prefix":"bae_admin_abcd"}`)
	b.opts.Rotate = true
	if err := b.run(t); err != nil {
		t.Fatal(err)
	}
	plain := b.checkGenerated(t) // exactly one active row: the new one
	if plain == oldPlain {
		t.Fatal("rotation kept the old key")
	}
	if rows := b.keys.active(baton.RoleAdmin); rows[0].ID == old.ID {
		t.Fatal("old row still active")
	}
	if got := b.log.messages(); !slices.Equal(got, []string{"INFO admin key rotated"}) {
		t.Fatalf("logs = %q", got)
	}
	wantCode(t, New(Options{Keys: b.keys}).AdminKey(context.Background(), oldPlain), baton.ECodeUnauthorized, "invalid admin key")
}

func TestBootstrapRotateWithoutKeyFile(t *testing.T) {
	b := newBoot(t)
	b.opts.Rotate = true
	if err := b.run(t); err != nil {
		t.Fatal(err)
	}
	b.checkGenerated(t)
}

func TestBootstrapFailures(t *testing.T) {
	boom := errors.New("db down")

	t.Run("list fails", func(t *testing.T) {
		b := newBoot(t)
		b.keys.errList = boom
		if err := b.run(t); !errors.Is(err, boom) || errors.Is(err, ErrBadHashFile) {
			t.Fatalf("Bootstrap = %v", err)
		}
	})
	t.Run("create fails", func(t *testing.T) {
		b := newBoot(t)
		b.keys.errCreate = boom
		if err := b.run(t); !errors.Is(err, boom) || errors.Is(err, ErrBadHashFile) {
			t.Fatalf("Bootstrap = %v", err)
		}
	})
	t.Run("revoke fails", func(t *testing.T) {
		b := newBoot(t)
		b.opts.Rotate = true
		b.keys.errRevoke = boom
		if err := b.run(t); !errors.Is(err, boom) {
			t.Fatalf("Bootstrap = %v", err)
		}
		if _, err := os.Stat(b.opts.KeyFile); !errors.Is(err, fs.ErrNotExist) {
			t.Fatal("key generated although revocation failed")
		}
	})
	t.Run("key file cannot be written", func(t *testing.T) {
		b := newBoot(t)
		blocker := filepath.Join(b.dir, "file")
		if err := os.WriteFile(blocker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		b.opts.KeyFile = filepath.Join(blocker, "admin-key.pem") // parent is a file
		err := b.run(t)
		if err == nil || errors.Is(err, ErrBadHashFile) {
			t.Fatalf("Bootstrap = %v, want a runtime error", err)
		}
		if n := len(b.keys.active(baton.RoleAdmin)); n != 0 {
			t.Fatalf("%d admin rows stored without a key file", n)
		}
	})
	t.Run("no key file configured", func(t *testing.T) {
		b := newBoot(t)
		b.opts.KeyFile = ""
		if err := b.run(t); err == nil {
			t.Fatal("self-generation without a key file succeeded")
		}
	})
}

func TestBootstrapProductionHash(t *testing.T) {
	// Without the test hook, generated keys get BAE's parameters.
	b := newBoot(t)
	b.opts.hash = nil
	if err := b.run(t); err != nil {
		t.Fatal(err)
	}
	rows := b.keys.active(baton.RoleAdmin)
	if len(rows) != 1 || !strings.HasPrefix(rows[0].Hash, "$argon2id$v=19$m=65536,t=3,p=1$") {
		t.Fatalf("rows = %+v", rows)
	}
}
