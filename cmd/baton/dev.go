package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton"
)

// devDataDir is where `baton dev` keeps everything.
const devDataDir = "baton-data"

// devProfileName is the profile `baton dev` creates on first run.
const devProfileName = "default"

// devTools are the client tools the dev profile allows: the demo tools of
// `baton chat`.
var devTools = []string{"get_time", "roll_dice"}

func (c *cli) devCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local server with everything set up (data in ./baton-data)",
		Long: `dev runs the server on loopback with its data in ./baton-data: a SQLite
database, the admin key, and a client key for the profile "default", which
uses Baton's offline scripted model (plus Anthropic or OpenAI when
ANTHROPIC_API_KEY or OPENAI_API_KEY is set on first run). Re-running reuses
what exists. BAE_* variables still override every default.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.serve(cmd.Context(), &f, &devOptions{dir: devDataDir, getenv: c.getenv})
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// devOptions adapt `serve` into `dev`.
type devOptions struct {
	dir       string
	getenv    func(string) string
	clientKey string // plaintext, known after seed
}

// adjust swaps serve's production defaults for local ones, keeping every
// value the environment or a flag set explicitly.
func (d *devOptions) adjust(cfg *serveConfig, f *serveFlags) {
	unset := func(name string) bool { return d.getenv(name) == "" }
	if unset("BAE_ADDR") {
		cfg.Addr = "127.0.0.1:8080"
	}
	if unset("BAE_DB_PATH") {
		cfg.DBPath = filepath.Join(d.dir, "baton.db")
	}
	if unset("BAE_ADMIN_KEY_FILE") && f.adminKeyFile == "" {
		cfg.AdminKeyFile = filepath.Join(d.dir, "admin-key.pem")
	}
	if unset("BAE_ADMIN_KEY_HASH_FILE") && f.adminKeyHashFile == "" {
		cfg.AdminKeyHashFile = filepath.Join(d.dir, "admin-key-hash.pem")
	}
	if cfg.ConfigPath == "" {
		if p := filepath.Join(d.dir, "bae-config.toml"); fileExists(p) {
			cfg.ConfigPath = p
		}
	}
	if unset("BAE_SANDBOX_DRIVER") {
		cfg.SandboxDriver = "process"
	}
	cfg.Limits.RateLimit = 0 // dev never rate-limits
}

// addProviders returns ps with the offline scripted provider added, and
// the real providers whose API keys are in the environment, unless the
// config file already names them.
func (d *devOptions) addProviders(ps []baton.ProviderEntry, lookup func(string) (string, bool)) []baton.ProviderEntry {
	add := func(e baton.ProviderEntry) {
		if !slices.ContainsFunc(ps, func(p baton.ProviderEntry) bool { return p.Name == e.Name }) {
			ps = append(ps, e)
		}
	}
	add(baton.ProviderEntry{Name: "scripted", Provider: baton.ProviderScripted, Model: "scripted", MaxTokens: 4096})
	if _, ok := lookup("ANTHROPIC_API_KEY"); ok {
		add(baton.ProviderEntry{Name: "anthropic", Provider: baton.ProviderAnthropic, Model: "claude-sonnet-4-5",
			AuthToken: "${ANTHROPIC_API_KEY}", MaxTokens: 4096})
	}
	if _, ok := lookup("OPENAI_API_KEY"); ok {
		add(baton.ProviderEntry{Name: "openai", Provider: baton.ProviderOpenAI, Model: "gpt-4o-mini",
			AuthToken: "${OPENAI_API_KEY}", MaxTokens: 4096})
	}
	slices.SortFunc(ps, func(a, b baton.ProviderEntry) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

// seed creates the dev profile and client key on first run and reuses them
// afterwards. The client key's plaintext is kept in the data dir (mode
// 0600) so it can be shown again; this is a development convenience that
// `serve` never does.
func (d *devOptions) seed(ctx context.Context, db baton.Store, r *baton.Registry) error {
	prof, err := findProfile(ctx, db, devProfileName)
	if err != nil {
		return err
	}
	if prof == nil {
		prof = &baton.Profile{
			ID: baton.NewID(baton.PrefixProfile), Name: devProfileName,
			PrimaryProvider: "scripted", MaxIterations: baton.DefaultMaxIterations,
			CreatedAt: baton.Now(),
		}
		prof.UpdatedAt = prof.CreatedAt
		var chain []string
		for _, name := range []string{"anthropic", "openai"} {
			if _, ok := r.Provider(name); ok {
				chain = append(chain, name)
			}
		}
		if len(chain) > 0 {
			prof.PrimaryProvider = chain[0]
			prof.FallbackProviders = append(chain[1:], "scripted")
		}
		for _, t := range devTools {
			prof.AllowedTools = append(prof.AllowedTools, []byte(`"`+t+`"`))
		}
		if err := db.CreateProfile(ctx, prof); err != nil {
			return fmt.Errorf("create profile: %w", err)
		}
	}

	keyFile := d.clientKeyFile()
	if b, err := os.ReadFile(keyFile); err == nil {
		plain := strings.TrimSpace(string(b))
		k, err := db.KeyByHash(ctx, baton.RoleClient, baton.Digest(plain))
		if err == nil && k.ProfileID == prof.ID {
			d.clientKey = plain
			return nil
		}
		if err != nil && baton.ErrorCode(err) != baton.ECodeNotFound {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	k, plain := baton.MintKey(baton.RoleClient, "dev", prof.ID, "")
	k.Scopes = baton.DefaultScopes
	if err := db.CreateKey(ctx, k); err != nil {
		return fmt.Errorf("create client key: %w", err)
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, []byte(plain+"\n"), 0o600); err != nil {
		return err
	}
	d.clientKey = plain
	return nil
}

// clientKeyFile is where the dev client key's plaintext is kept.
func (d *devOptions) clientKeyFile() string { return filepath.Join(d.dir, "client-key") }

func (d *devOptions) banner(w io.Writer, clientURL, adminURL string) {
	chat, admin := "go run ./cmd/baton chat", "go run ./cmd/baton admin sessions list"
	if clientURL != "http://127.0.0.1:8080" {
		chat += " --url " + clientURL
	}
	if adminURL != "http://127.0.0.1:8081" {
		admin += " --admin-addr " + adminURL
	}
	fmt.Fprintf(w, `
Baton dev server is running (data in ./%s).

  client API   %s
  admin API    %s   (admin key in ./%s/admin-key.pem)
  client key   %s   (profile %q)

Next, in another terminal:
  %s          (then type: call get_time)
  %s

`, d.dir, clientURL, adminURL, d.dir, d.clientKey, devProfileName, chat, admin)
}

func findProfile(ctx context.Context, db baton.ProfileStore, name string) (*baton.Profile, error) {
	var found *baton.Profile
	err := eachProfile(ctx, db, func(p *baton.Profile) bool {
		if p.Name == name {
			found = p
		}
		return found == nil
	})
	return found, err
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
