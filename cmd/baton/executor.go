package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/internal/supervisor"
	"github.com/baton-engine/baton/machine"
	"github.com/baton-engine/baton/sandbox"
)

// Environment variables of `baton executor`.
const (
	envExecutorURL        = "BATON_EXECUTOR_URL"
	envExecutorCredential = "BATON_EXECUTOR_CREDENTIAL"
	envExecutorConfig     = "BATON_EXECUTOR_CONFIG"
)

// executorFlags are the command-line flags of `baton executor`.
type executorFlags struct {
	url, credentialFile, environment, machine, config, workDir string
	logLevel, logFormat, executorID                            string
	drainTimeout                                               time.Duration
	check                                                      bool
}

func (c *cli) executorCmd() *cobra.Command {
	var f executorFlags
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Connect this machine to a Baton server as an executor: tools, a shell or a brain",
		Long: `executor connects out to a Baton server over WebSocket (protocol
bma.executor.v1.1) and serves it until SIGINT or SIGTERM, reconnecting on
its own.

With --environment env_… it serves the command-backed [[tools]] of its
config file to the sessions whose profile lists the environment. With
--machine mch_… it serves a shell in --work-dir ([process], the default)
and/or a brain that runs whole agent turns ([agent]).

The credential (bae_exc_…) comes from --credential-file or
BATON_EXECUTOR_CREDENTIAL and is never logged. On SIGTERM the executor
takes no new work, lets the running calls and turns finish (up to
--drain-timeout) and then disconnects.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.executor(cmd.Context(), &f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.url, "url", "", "Baton client URL (default $"+envExecutorURL+", $BAE_SERVER_URL or http://127.0.0.1:8080)")
	fs.StringVar(&f.credentialFile, "credential-file", "", "file holding the bae_exc_… credential (else $"+envExecutorCredential+", which holds the secret itself)")
	fs.StringVar(&f.environment, "environment", "", "serve tools to this environment (env_…)")
	fs.StringVar(&f.machine, "machine", "", "serve a shell and/or a brain as this machine (mch_…)")
	fs.StringVar(&f.config, "config", "", "executor.toml (default $"+envExecutorConfig+"; required with --environment)")
	fs.StringVar(&f.workDir, "work-dir", ".", "directory commands run in (created if missing)")
	fs.StringVar(&f.executorID, "executor-id", "", "register under this id (sessions resume after a dropped connection within this process, not after a restart of it)")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default from $BAE_LOG, else info)")
	fs.StringVar(&f.logFormat, "log-format", "", "text or json (default $BATON_LOG_FORMAT, else text)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 2*time.Minute, "on SIGTERM, how long running work may take to finish")
	fs.BoolVar(&f.check, "check", false, "validate the flags and the config file, then exit")
	return cmd
}

// executorSetup is `baton executor`'s resolved configuration.
type executorSetup struct {
	url          string
	credential   string // never logged
	scope        executor.Scope
	file         *execConfig
	workDir      string
	executorID   string
	level        slog.Level
	format       string
	drainTimeout time.Duration
}

// setup resolves flags < environment defaults into an executorSetup.
// Every error is a usage error (exit 2).
func (c *cli) executorSetup(f *executorFlags) (*executorSetup, error) {
	s := &executorSetup{executorID: f.executorID, drainTimeout: f.drainTimeout}
	s.url = firstNonEmpty(f.url, c.getenv(envExecutorURL), c.getenv("BAE_SERVER_URL"), "http://127.0.0.1:8080")
	if u, err := url.Parse(s.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q must be an http:// or https:// URL", s.url)
	}
	switch {
	case f.environment != "" && f.machine != "":
		return nil, errors.New("pass either --environment or --machine, not both")
	case f.environment != "":
		if !strings.HasPrefix(f.environment, "env_") {
			return nil, fmt.Errorf("--environment %q is not an environment id (env_…)", f.environment)
		}
		s.scope = executor.Environment(f.environment)
	case f.machine != "":
		if !strings.HasPrefix(f.machine, "mch_") {
			return nil, fmt.Errorf("--machine %q is not a machine id (mch_…)", f.machine)
		}
		s.scope = executor.Machine(f.machine)
	default:
		return nil, errors.New("pass --environment env_… (a tool executor) or --machine mch_… (a shell and/or a brain)")
	}
	if s.drainTimeout < 0 {
		return nil, errors.New("--drain-timeout must not be negative")
	}
	var err error
	if s.level, s.format, err = c.executorLogging(f); err != nil {
		return nil, err
	}
	if err := c.executorCredential(f, s); err != nil {
		return nil, err
	}
	path := firstNonEmpty(f.config, c.getenv(envExecutorConfig))
	switch {
	case path != "":
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if s.file, err = parseExecConfig(path, data); err != nil {
			return nil, err
		}
	case s.scope.Kind == executor.ScopeEnvironment:
		return nil, errors.New("an environment executor needs --config with its [[tools]]")
	default:
		s.file = &execConfig{} // a machine with no file serves a shell
	}
	if err := s.file.forScope(s.scope.Kind); err != nil {
		return nil, err
	}
	if s.workDir, err = filepath.Abs(f.workDir); err != nil {
		return nil, fmt.Errorf("--work-dir: %w", err)
	}
	if x := s.file.Files; x != nil && !filepath.IsAbs(x.Root) {
		x.Root = filepath.Join(s.workDir, x.Root) // "" is the work directory itself
	}
	return s, nil
}

// executorCredential reads the credential from --credential-file or the
// environment; --check needs none.
func (c *cli) executorCredential(f *executorFlags, s *executorSetup) error {
	if f.credentialFile != "" {
		b, err := os.ReadFile(f.credentialFile)
		if err != nil {
			return fmt.Errorf("--credential-file: %w", err)
		}
		s.credential = strings.TrimSpace(string(b))
	} else {
		s.credential = strings.TrimSpace(c.getenv(envExecutorCredential))
	}
	switch {
	case s.credential == "" && f.check:
		return nil
	case s.credential == "":
		return errors.New("no executor credential: pass --credential-file or set " + envExecutorCredential)
	case !strings.HasPrefix(s.credential, executor.CredentialPrefix):
		return errors.New("the executor credential is not a " + executor.CredentialPrefix + "… secret")
	}
	return nil
}

func (c *cli) executorLogging(f *executorFlags) (slog.Level, string, error) {
	level := parseLogLevel(c.getenv("BAE_LOG"))
	if f.logLevel != "" {
		if err := level.UnmarshalText([]byte(f.logLevel)); err != nil || !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(f.logLevel)) {
			return 0, "", fmt.Errorf("--log-level %q must be debug, info, warn or error", f.logLevel)
		}
	}
	format := firstNonEmpty(f.logFormat, c.getenv("BATON_LOG_FORMAT"), "text")
	if format != "text" && format != "json" {
		return 0, "", fmt.Errorf("--log-format %q must be text or json", format)
	}
	return level, format, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// executor runs `baton executor` until ctx ends (then drains) or the
// server stops it for good.
func (c *cli) executor(ctx context.Context, f *executorFlags) error {
	s, err := c.executorSetup(f)
	if err != nil {
		return usageErr(fmt.Errorf("configuration error: %w", err))
	}
	if p := s.process(); p != nil && p.Isolate { // what a start checks first
		if err := sandbox.RootfsDir(p.RootfsDir).EnsureImage(ctx, p.Image); err != nil {
			return usageErr(fmt.Errorf("configuration error: process.image %q: %w", p.Image, err))
		}
	}
	if f.check {
		fmt.Fprintln(c.stdout, "configuration ok: "+s.summary())
		return nil
	}
	log := newLogger(c.stderr, &serveConfig{LogLevel: s.level, LogFormat: s.format})
	if err := os.MkdirAll(s.workDir, 0o700); err != nil {
		return runtimeErr(fmt.Errorf("work directory: %w", err))
	}
	w, err := buildExecWorker(ctx, s, log)
	if err != nil {
		return err
	}
	defer w.close()
	e, err := executor.New(w.cfg)
	if err != nil {
		return usageErr(fmt.Errorf("configuration error: %w", err))
	}
	log.Info("executor connecting", "url", s.url, "scope", s.scope.Kind, "id", s.scope.ID, "serves", s.summary())
	if err := e.Open(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted before the first registration
		}
		return runtimeErr(connectError(s, err))
	}
	log.Info("executor registered", "executor_id", e.ExecutorID())
	select {
	case <-e.Done():
		return runtimeErr(fmt.Errorf("stopped by the server: %w", e.Err()))
	case <-ctx.Done():
	}
	drainAndClose(context.WithoutCancel(ctx), e, s.drainTimeout, log)
	if err := e.Err(); err != nil {
		return runtimeErr(fmt.Errorf("stopped by the server: %w", err))
	}
	return nil
}

// connectError explains a failed first connection.
func connectError(s *executorSetup, err error) error {
	var he *executor.HTTPError
	if errors.As(err, &he) {
		switch he.Status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the server at %s refused the executor credential for %s %s: %w", s.url, s.scope.Kind, s.scope.ID, err)
		case http.StatusNotFound:
			return fmt.Errorf("the server at %s does not know %s %s (or has no executor endpoints): %w", s.url, s.scope.Kind, s.scope.ID, err)
		}
	}
	return fmt.Errorf("connect to %s: %w", s.url, err)
}

// summary says what the executor serves.
func (s *executorSetup) summary() string {
	var parts []string
	if n := len(s.file.Tools); n > 0 {
		names := make([]string, n)
		for i, t := range s.file.Tools {
			names[i] = t.Def.Name
		}
		parts = append(parts, fmt.Sprintf("%d tool(s) [%s]", n, strings.Join(names, ", ")))
	}
	if p := s.process(); p != nil {
		shell := "shell"
		if p.Isolate {
			shell = "isolated shell (image " + p.Image + ")"
		}
		parts = append(parts, shell)
	}
	if a := s.file.Agent; a != nil {
		parts = append(parts, a.Type+" brain")
	}
	if x := s.file.Files; x != nil {
		parts = append(parts, "session files ("+x.Mode+", below "+x.Root+")")
	}
	return strings.Join(parts, ", ")
}

// process is the shell a machine serves: [process], or a plain shell
// when the file declares neither [process] nor [agent].
func (s *executorSetup) process() *machine.ProcessSpec {
	if s.scope.Kind != executor.ScopeMachine {
		return nil
	}
	if s.file.Process == nil && s.file.Agent == nil {
		return &machine.ProcessSpec{MaxOutput: executor.DefaultMaxOutput}
	}
	return s.file.Process
}

// execWorker is what the executor serves, built from the setup.
type execWorker struct {
	cfg     executor.Config
	closers []func()
}

func (w *execWorker) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
}

// buildExecWorker makes the SDK config: tools, shell and brain.
func buildExecWorker(ctx context.Context, s *executorSetup, log *slog.Logger) (*execWorker, error) {
	w := &execWorker{cfg: executor.Config{
		BaseURL: s.url, Credential: s.credential, Scope: s.scope, ExecutorID: s.executorID, Logger: log,
	}}
	env := childEnv()
	tools := make([]executor.Tool, len(s.file.Tools))
	for i, t := range s.file.Tools {
		tools[i] = machine.NewTool(t, s.workDir, env)
	}
	if s.scope.Kind == executor.ScopeEnvironment {
		w.cfg.Tools = tools
		return w, nil
	}
	var shell executor.ProcessHandler
	if p := s.process(); p != nil {
		if p.Isolate {
			mounts := "" // commands in the sandboxes do not see the mounts
			if x := s.file.Files; x != nil {
				mounts = x.Root
			}
			sb, err := openSandboxShell(ctx, p, s.workDir, mounts, log)
			if err != nil {
				return nil, err
			}
			w.closers = append(w.closers, sb.Close)
			shell = sb
		} else {
			// Wrap: the whole process tree of a command dies with the executor.
			shell = &executor.Shell{Dir: s.workDir, Env: env, MaxOutput: p.MaxOutput, Wrap: supervisor.Wrap}
		}
		w.cfg.Capabilities.Process = &executor.ProcessCapability{MaxSessions: p.MaxSessions}
		w.cfg.Process = shell
	}
	if a := s.file.Agent; a != nil {
		var brain executor.Agent
		if a.Type == machine.AgentCommand {
			brain = machine.NewCommandAgent(a, s.workDir, env, log)
		} else {
			brain = machine.NewBrain(a, tools, shell, log)
		}
		w.cfg.Capabilities.Agent = &executor.AgentCapability{MaxSessions: a.MaxSessions, CustomTools: a.Type == machine.AgentBuiltin}
		w.cfg.Agent = brain
	}
	if x := s.file.Files; x != nil {
		w.cfg.Files = &executor.FileMounts{Root: x.Root, Mode: x.Mode, SyncInterval: x.SyncInterval, AllowOther: x.AllowOther}
	}
	return w, nil
}

// openSandboxShell makes the process driver ready for p.Image, with its
// state under workDir/.sandboxes, removes what an earlier run left
// there and starts the shell's idle sweeper.
func openSandboxShell(ctx context.Context, p *machine.ProcessSpec, workDir, mounts string, log *slog.Logger) (*machine.SandboxShell, error) {
	d := sandbox.NewProcess(sandbox.ProcessOptions{
		RootfsDir: p.RootfsDir, StateDir: filepath.Join(workDir, ".sandboxes"), OutputCap: p.MaxOutput, Logger: log,
	})
	if err := d.EnsureImage(ctx, p.Image); err != nil {
		return nil, usageErr(fmt.Errorf("configuration error: process.image %q: %w", p.Image, err))
	}
	if n, err := d.Cleanup(ctx); err != nil {
		log.Warn("sandbox cleanup", "removed", n, "err", err)
	}
	sb := machine.NewSandboxShell(d, p, mounts, log)
	sb.Open()
	return sb, nil
}

// childEnv is the environment of every command the executor starts: its
// own, without the credential.
func childEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, envExecutorCredential+"=")
	})
}
