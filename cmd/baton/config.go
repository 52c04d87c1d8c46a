package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/baton-engine/baton/adminapi"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/httpapi"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/spf13/pflag"
)

// serveConfig is the process configuration of `serve` and `dev`, built from
// defaults < environment < flags. bae-config.toml is loaded separately.
type serveConfig struct {
	Addr              string
	AdminAddr         string
	DBPath            string
	DatabaseURL       string // BATON_DATABASE_URL; a postgres:// URL selects PostgreSQL
	ConfigPath        string
	LogLevel          slog.Level
	LogFormat         string // text | json
	ShutdownTimeout   time.Duration
	TurnTimeout       time.Duration
	SubagentTimeout   time.Duration
	ProviderTimeout   time.Duration
	ProviderRetries   int
	MaxSubagents      int
	MaxClients        int           // BATON_MAX_CLIENTS_PER_SESSION
	MaxQueuedTurns    int           // BATON_MAX_QUEUED_TURNS
	MaxSubscribers    int           // BATON_MAX_SUBSCRIBERS_PER_SESSION
	ClientCallTimeout time.Duration // BATON_CLIENT_CALL_TIMEOUT
	MCPCallTimeout    time.Duration // BATON_MCP_CALL_TIMEOUT
	AdminKeyFile      string
	AdminKeyHashFile  string
	DisableAdminAuth  bool
	RotateAdminKey    bool
	SandboxDriver     string
	RootfsDir         string
	DockerSocket      string
	MaxBodyBytes      int64
	MaxInflightBytes  int64 // BATON_MAX_INFLIGHT_BYTES
	ReadyFile         string
	Check             bool
	Limits            limitConfig    // rate limit, Client-Version, receipts
	PublicURL         string         // BATON_PUBLIC_URL: the client origin executors reach ("" is the listener's URL)
	Executor          executorConfig // executor tokens
	Files             fileConfig     // session files, artifacts, view tokens
	Cluster           clusterConfig  // nodes sharing one PostgreSQL database
}

// serveFlags holds the command-line flags shared by the root command,
// serve and dev; flags may appear before or after the subcommand.
type serveFlags struct {
	config, adminKeyFile, adminKeyHashFile string
	rotate, disableAuth, check             bool
	fs                                     *pflag.FlagSet
}

// pathFlags are the flags that name a file; given empty they are an error
// rather than a silent fall back to the environment.
var pathFlags = []string{"config", "admin-key-file", "admin-key-hash-file"}

func (f *serveFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.config, "config", "", "path of bae-config.toml (overrides BAE_CONFIG)")
	fs.StringVar(&f.adminKeyFile, "admin-key-file", "", "where the generated admin key is written (overrides BAE_ADMIN_KEY_FILE)")
	fs.StringVar(&f.adminKeyHashFile, "admin-key-hash-file", "", "pre-provisioned admin key hash (overrides BAE_ADMIN_KEY_HASH_FILE)")
	fs.BoolVar(&f.rotate, "rotate-admin-key", false, "revoke every admin key and generate a new key file")
	fs.BoolVar(&f.disableAuth, "dangerously-disable-admin-auth", false, "serve the admin API without authentication")
	fs.BoolVar(&f.check, "check", false, "validate the configuration and exit")
}

// loadServeConfig reads the environment, then applies flags. Every error
// is a configuration error (exit 2).
func loadServeConfig(getenv func(string) string, f *serveFlags) (*serveConfig, error) {
	c := &serveConfig{
		Addr:              "0.0.0.0:8080",
		AdminAddr:         "127.0.0.1:8081",
		DBPath:            "/var/lib/bae/bae.db",
		LogLevel:          slog.LevelInfo,
		LogFormat:         "text",
		ShutdownTimeout:   30 * time.Second,
		TurnTimeout:       120 * time.Second,
		SubagentTimeout:   600 * time.Second,
		ProviderTimeout:   120 * time.Second,
		MaxSubagents:      8,
		MaxClients:        16,
		MaxQueuedTurns:    engine.DefaultMaxQueuedTurns,
		MaxSubscribers:    engine.DefaultMaxSubscribers,
		ClientCallTimeout: 120 * time.Second,
		MCPCallTimeout:    30 * time.Second,
		AdminKeyFile:      "/var/lib/bae/admin-key.pem",
		AdminKeyHashFile:  "/var/lib/bae/admin-key-hash.pem",
		SandboxDriver:     "docker",
		MaxBodyBytes:      httpx.DefaultMaxBody,
		MaxInflightBytes:  httpapi.DefaultMaxInflight,
	}
	var errs []error
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	secs := func(name string, dst *time.Duration) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a non-negative whole number of seconds", name, v))
				return
			}
			*dst = time.Duration(n) * time.Second
		}
	}
	str("BAE_ADDR", &c.Addr)
	str("BAE_ADMIN_ADDR", &c.AdminAddr)
	str("BAE_DB_PATH", &c.DBPath)
	str("BATON_DATABASE_URL", &c.DatabaseURL)
	str("BAE_CONFIG", &c.ConfigPath)
	str("BAE_ADMIN_KEY_FILE", &c.AdminKeyFile)
	str("BAE_ADMIN_KEY_HASH_FILE", &c.AdminKeyHashFile)
	str("BATON_DOCKER_SOCKET", &c.DockerSocket)
	str("BATON_READY_FILE", &c.ReadyFile)
	str("BATON_SANDBOX_ROOTFS_DIR", &c.RootfsDir)
	c.LogLevel = parseLogLevel(getenv("BAE_LOG"))
	if v := strings.TrimSpace(getenv("BATON_LOG_FORMAT")); v != "" {
		if v != "text" && v != "json" {
			errs = append(errs, fmt.Errorf("BATON_LOG_FORMAT: %q must be text or json", v))
		}
		c.LogFormat = v
	}
	secs("BAE_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout)
	secs("BAE_TURN_TIMEOUT", &c.TurnTimeout)
	secs("BAE_SUBAGENT_TIMEOUT", &c.SubagentTimeout)
	secs("BATON_PROVIDER_TIMEOUT", &c.ProviderTimeout)
	secs("BATON_CLIENT_CALL_TIMEOUT", &c.ClientCallTimeout)
	secs("BATON_MCP_CALL_TIMEOUT", &c.MCPCallTimeout)
	positive := func(name string, dst *int) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil || n == 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive whole number", name, v))
			}
			*dst = int(n)
		}
	}
	positive("BATON_MAX_CLIENTS_PER_SESSION", &c.MaxClients)
	positive("BATON_MAX_QUEUED_TURNS", &c.MaxQueuedTurns)
	positive("BATON_MAX_SUBSCRIBERS_PER_SESSION", &c.MaxSubscribers)
	if v := strings.TrimSpace(getenv("BATON_PROVIDER_RETRIES")); v != "" {
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil {
			errs = append(errs, fmt.Errorf("BATON_PROVIDER_RETRIES: %q is not a small non-negative whole number", v))
		}
		c.ProviderRetries = int(n)
		if n == 0 {
			c.ProviderRetries = -1 // the engine reads 0 as "default"
		}
	}
	if v := strings.TrimSpace(getenv("BAE_MAX_SUBAGENTS_PER_SESSION")); v != "" {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			errs = append(errs, fmt.Errorf("BAE_MAX_SUBAGENTS_PER_SESSION: %q is not a non-negative whole number", v))
		}
		c.MaxSubagents = int(n)
	}
	if v := strings.TrimSpace(getenv("BATON_MAX_BODY_BYTES")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("BATON_MAX_BODY_BYTES: %q is not a positive number of bytes", v))
		}
		c.MaxBodyBytes = n
	}
	if v := strings.TrimSpace(getenv("BATON_MAX_INFLIGHT_BYTES")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("BATON_MAX_INFLIGHT_BYTES: %q is not a positive number of bytes", v))
		}
		c.MaxInflightBytes = n
	}
	if v := strings.TrimSpace(getenv("BAE_SANDBOX_DRIVER")); v != "" {
		c.SandboxDriver = v
	}
	switch c.SandboxDriver {
	case "docker", "process":
	case "apple-container":
		errs = append(errs, errors.New("BAE_SANDBOX_DRIVER: Baton has no apple-container driver (BAE's is macOS-only); use docker or process"))
	default:
		errs = append(errs, fmt.Errorf("BAE_SANDBOX_DRIVER: %q must be docker or process", c.SandboxDriver))
	}
	if v := getenv("BAE_DANGEROUSLY_DISABLE_ADMIN_AUTH"); v != "" {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "true":
			c.DisableAdminAuth = true
		}
	}

	if f != nil {
		for _, name := range pathFlags {
			if fl := f.fs.Lookup(name); fl.Changed && fl.Value.String() == "" {
				errs = append(errs, fmt.Errorf("--%s needs a path", name))
			}
		}
		if f.config != "" {
			c.ConfigPath = f.config
		}
		if f.adminKeyFile != "" {
			c.AdminKeyFile = f.adminKeyFile
		}
		if f.adminKeyHashFile != "" {
			c.AdminKeyHashFile = f.adminKeyHashFile
		}
		c.DisableAdminAuth = c.DisableAdminAuth || f.disableAuth
		c.RotateAdminKey = f.rotate
		c.Check = f.check
	}

	if v := strings.TrimSpace(getenv("BATON_PUBLIC_URL")); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("BATON_PUBLIC_URL %q: want the client origin, http(s)://host[:port]", v))
		}
		c.PublicURL = v
	}
	if _, err := netip.ParseAddrPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("BAE_ADDR: %q is not an IP:port address", c.Addr))
	}
	if _, err := netip.ParseAddrPort(c.AdminAddr); err != nil {
		errs = append(errs, fmt.Errorf("BAE_ADMIN_ADDR: %q is not an IP:port address", c.AdminAddr))
	} else if err := adminapi.CheckAddr(c.AdminAddr); err != nil {
		errs = append(errs, fmt.Errorf("BAE_ADMIN_ADDR: %w", err))
	}
	if c.RotateAdminKey && c.DisableAdminAuth {
		errs = append(errs, errors.New("--rotate-admin-key cannot be combined with disabled admin authentication"))
	}
	limits, err := loadLimits(getenv)
	c.Limits = limits
	errs = append(errs, err)
	c.Executor, err = loadExecutorConfig(getenv)
	errs = append(errs, err)
	c.Files, err = loadFileConfig(getenv)
	errs = append(errs, err)
	c.Cluster, err = loadClusterConfig(getenv)
	errs = append(errs, err)
	if c.DatabaseURL != "" && !isPostgresURL(c.DatabaseURL) {
		errs = append(errs, fmt.Errorf("BATON_DATABASE_URL: must be a postgres:// URL (use BAE_DB_PATH for SQLite)"))
	}
	return c, errors.Join(errs...)
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// storeURL is what the store opens: the PostgreSQL URL when set, else the
// SQLite file.
func (c *serveConfig) storeURL() string {
	if c.DatabaseURL != "" {
		return c.DatabaseURL
	}
	return c.DBPath
}

// parseLogLevel reads BAE_LOG, which in BAE is a tracing filter such as
// "info" or "warn,baesrv=debug": the first bare level wins; anything
// unreadable means info.
func parseLogLevel(v string) slog.Level {
	for _, part := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(part)) {
		case "trace", "debug":
			return slog.LevelDebug
		case "info":
			return slog.LevelInfo
		case "warn", "warning":
			return slog.LevelWarn
		case "error", "off":
			return slog.LevelError
		}
	}
	return slog.LevelInfo
}
