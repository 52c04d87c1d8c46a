package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/executor"
	"github.com/baton-engine/baton/sandbox"
)

// executorConfig is the executor side of `serve`: what executor tokens
// live (BATON_EXECUTOR_TOKEN_TTL), the hub's heartbeat interval and resume
// window, and the bound of one executor tool call. Each is a positive Go
// duration or whole seconds.
type executorConfig struct {
	TokenTTL          time.Duration
	HeartbeatInterval time.Duration // BATON_EXECUTOR_HEARTBEAT_INTERVAL
	ResumeWindow      time.Duration // BATON_EXECUTOR_RESUME_WINDOW
	CallTimeout       time.Duration // BATON_EXECUTOR_CALL_TIMEOUT
}

// loadExecutorConfig reads the executor settings from the environment.
func loadExecutorConfig(getenv func(string) string) (executorConfig, error) {
	c := executorConfig{
		TokenTTL:          auth.DefaultExecutorTokenTTL,
		HeartbeatInterval: executor.DefaultHeartbeatInterval,
		ResumeWindow:      executor.DefaultResumeWindow,
		CallTimeout:       baton.DefaultExecutorCallTimeout,
	}
	return c, errors.Join(
		envDuration(getenv, "BATON_EXECUTOR_TOKEN_TTL", &c.TokenTTL),
		envDuration(getenv, "BATON_EXECUTOR_HEARTBEAT_INTERVAL", &c.HeartbeatInterval),
		envDuration(getenv, "BATON_EXECUTOR_RESUME_WINDOW", &c.ResumeWindow),
		envDuration(getenv, "BATON_EXECUTOR_CALL_TIMEOUT", &c.CallTimeout),
	)
}

// revokers tells each of its members of a revoked executor credential: the
// token service (so its tokens stop verifying at once) and whatever holds
// live executor connections.
type revokers []baton.ExecutorRevoker

func (rs revokers) RevokeCredential(id string) {
	for _, r := range rs {
		r.RevokeCredential(id)
	}
}

// executorSide is the executor hub of a running server with what serves
// sessions through it: Hands (environment tools, dispatch "executor") and
// Shell (remote sandboxes of images "executor:<machine_id>").
type executorSide struct {
	hub   *executor.Hub
	hands *executor.Hands
	shell *executor.Shell
}

// openExecutorSide opens the hub; creds issues brain turns' credentials,
// files the views of session files that fs.mount sends (renewed every
// renew). Its Close is a restart for executors:
// they are drained and closed with 1001, without executor.close, so that
// they reconnect once the server is back.
func openExecutorSide(cfg executorConfig, tokens baton.ExecutorTokens, creds baton.TurnCredentials, files executor.FileViews, renew time.Duration, sessions baton.SessionStore, log *slog.Logger) (*executorSide, error) {
	hub, err := executor.Open(executor.Options{
		Tokens: tokens, Logger: log, Restartable: true, Credentials: creds,
		HeartbeatInterval: cfg.HeartbeatInterval, ResumeWindow: cfg.ResumeWindow,
		Files: files, FileRenew: renew,
	})
	if err != nil {
		return nil, fmt.Errorf("executor hub: %w", err)
	}
	profileOf := func(ctx context.Context, id string) (string, error) {
		s, err := sessions.Session(ctx, id)
		if err != nil {
			return "", err
		}
		return s.ProfileID, nil
	}
	return &executorSide{hub: hub, hands: executor.NewHands(hub), shell: executor.NewShell(hub, profileOf)}, nil
}

// close shuts the executor side down within ctx and budget: pending
// releases and stops give up, then the hub drains and closes every
// connection. It is idempotent.
func (x *executorSide) close(ctx context.Context, budget time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	_ = x.hands.Close()
	_ = x.shell.Close()
	if err := x.hub.Close(ctx); err != nil {
		log.Warn("executor connections did not close in time", "err", err)
	}
}

// sandboxRouter is the server's sandbox driver: images
// "executor:<machine_id>" run on machine-scoped executors (Shell), every
// other image on the configured Docker or process driver.
type sandboxRouter struct {
	base     sandboxRunner // nil: no local driver
	images   sandbox.ImageEnsurer
	shell    *executor.Shell // set once the hub is open
	machines baton.MachineStore
}

var (
	_ sandboxRunner              = (*sandboxRouter)(nil)
	_ baton.SessionSandboxDriver = (*sandboxRouter)(nil)
)

// EnsureImage makes an executor image available when its machine exists;
// other images go to the local driver.
func (r *sandboxRouter) EnsureImage(ctx context.Context, image string) error {
	if id, ok := executor.MachineOf(image); ok {
		_, err := r.machines.Machine(ctx, id)
		if baton.ErrorCode(err) == baton.ECodeNotFound {
			return fmt.Errorf("machine %s does not exist: create it with POST /admin/v1/machines and run an executor with a shell (capability process) on it", id)
		}
		return err
	}
	if r.images == nil {
		return errors.New("no local sandbox driver")
	}
	return r.images.EnsureImage(ctx, image)
}

func (r *sandboxRouter) Start(ctx context.Context, image string) (string, error) {
	if _, ok := executor.MachineOf(image); ok {
		if r.shell == nil {
			return "", errors.New("executor shells are not available on this server")
		}
		return r.shell.Start(ctx, image)
	}
	if r.base == nil {
		return "", errors.New("no local sandbox driver")
	}
	return r.base.Start(ctx, image)
}

// StartFor starts an executor sandbox for the session, whose files it
// mounts; other images start as Start does.
func (r *sandboxRouter) StartFor(ctx context.Context, sessionID, image string) (string, error) {
	if _, ok := executor.MachineOf(image); ok && r.shell != nil {
		return r.shell.StartFor(ctx, sessionID, image)
	}
	return r.Start(ctx, image)
}

// local returns the driver that owns sandbox id.
func (r *sandboxRouter) local(id string) (baton.SandboxDriver, error) {
	if r.shell != nil && r.shell.Owns(id) {
		return r.shell, nil
	}
	if r.base == nil {
		return nil, errors.New("no local sandbox driver")
	}
	return r.base, nil
}

func (r *sandboxRouter) Exec(ctx context.Context, id, command string, opt baton.ExecOptions) (baton.ExecResult, error) {
	d, err := r.local(id)
	if err != nil {
		return baton.ExecResult{}, err
	}
	return d.Exec(ctx, id, command, opt)
}

func (r *sandboxRouter) Stop(ctx context.Context, id string) error {
	d, err := r.local(id)
	if err != nil {
		return err
	}
	return d.Stop(ctx, id)
}

// Cleanup removes the local driver's leftovers; executor sandboxes end
// with their hub.
func (r *sandboxRouter) Cleanup(ctx context.Context) (int, error) {
	if r.base == nil {
		return 0, nil
	}
	return r.base.Cleanup(ctx)
}
