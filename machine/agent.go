package machine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/internal/proc"
	"github.com/baton-engine/baton/internal/supervisor"
)

// Bounds of a CLI agent's output.
const (
	maxAgentLine   = 4 << 20  // one line of stdout
	maxAgentStderr = 64 << 10 // stderr kept for the error of a failed run
)

// CommandAgent is a brain that runs a command per turn, such as a
// Claude-Code-style CLI: AgentSpec.Command with {model}, {session_id} and
// {turn_id} filled in, in the work directory, the turn's text on stdin
// and the model gateway in its environment (ANTHROPIC_BASE_URL =
// model_base_url, ANTHROPIC_API_KEY = model_token, plus BATON_SESSION_ID
// and BATON_TURN_ID). Each line it prints is an agent.message; a
// non-zero exit fails the turn with its stderr. Input added while it
// runs is the prompt of another run in the same turn.
type CommandAgent struct {
	spec *AgentSpec
	dir  string
	env  []string
	log  *slog.Logger
}

// NewCommandAgent returns the agent that runs spec.Command in dir, with
// env (the caller's, without secrets) plus the turn's variables.
func NewCommandAgent(spec *AgentSpec, dir string, env []string, log *slog.Logger) *CommandAgent {
	return &CommandAgent{spec: spec, dir: dir, env: env, log: log}
}

// Open keeps no local state: the ref is the session id.
func (a *CommandAgent) Open(_ context.Context, sessionID, _ string) (string, error) {
	return sessionID, nil
}

// Close has nothing to release.
func (a *CommandAgent) Close(context.Context, string) error { return nil }

// Run runs the command for the turn's input, then again for each batch
// of input that arrived meanwhile.
func (a *CommandAgent) Run(ctx context.Context, t *executor.Turn) error {
	prompt := BlocksText(t.Input)
	tok := executor.TurnToken{Token: t.Metadata.ModelToken, ExpiresAt: t.Metadata.ModelTokenExpiresAt}
	for {
		if !tok.ExpiresAt.IsZero() && time.Until(tok.ExpiresAt) < refreshWithin {
			if fresh, err := t.RefreshModelToken(ctx); err == nil {
				tok = fresh
			} else {
				a.log.Warn("agent: model token refresh failed", "session_id", t.SessionID, "err", err)
			}
		}
		if err := a.runOnce(ctx, t, prompt, tok.Token); err != nil {
			return err
		}
		ins := t.Inputs()
		if len(ins) == 0 {
			return nil
		}
		texts := make([]string, len(ins))
		for i, in := range ins {
			texts[i] = BlocksText(in.Content)
		}
		prompt = strings.Join(texts, "\n")
	}
}

// runOnce runs the command once, emitting its stdout line by line.
func (a *CommandAgent) runOnce(ctx context.Context, t *executor.Turn, prompt, token string) error {
	run := ctx
	if a.spec.Timeout > 0 {
		var cancel context.CancelFunc
		run, cancel = context.WithTimeout(ctx, a.spec.Timeout)
		defer cancel()
	}
	argv := expandArgv(a.spec.Command, map[string]string{"model": a.spec.Model, "session_id": t.SessionID, "turn_id": t.ID})
	cmd := exec.CommandContext(run, argv[0], argv[1:]...)
	cmd.Dir = a.dir
	cmd.Env = append(slices.Clip(a.env),
		"ANTHROPIC_BASE_URL="+t.Metadata.ModelBaseURL,
		"ANTHROPIC_API_KEY="+token,
		"BATON_SESSION_ID="+t.SessionID,
		"BATON_TURN_ID="+t.ID,
	)
	cmd.Stdin = strings.NewReader(prompt)
	stderr := &capBuf{max: maxAgentStderr}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	proc.Group(cmd, killGrace)
	supervisor.Wrap(cmd)
	if err := proc.Start(cmd); err != nil {
		return fmt.Errorf("agent command: cannot run %s: %w", argv[0], err)
	}
	defer proc.Kill(cmd) // what it left running too
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 0, 64<<10), maxAgentLine)
	var emitErr error
	for lines.Scan() {
		line := strings.TrimRight(lines.Text(), "\r")
		if strings.TrimSpace(line) == "" || emitErr != nil {
			continue
		}
		_, emitErr = t.Emit(executor.TextMessageEvent(line))
	}
	scanErr := lines.Err()
	if scanErr != nil {
		proc.Kill(cmd) // it cannot be read any further
	}
	err = proc.Wait(run, cmd)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case run.Err() != nil:
		return fmt.Errorf("agent command timed out after %s", a.spec.Timeout)
	case scanErr != nil:
		return fmt.Errorf("agent command output: %w", scanErr)
	case emitErr != nil:
		return emitErr
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		msg := fmt.Sprintf("agent command exited with status %d", proc.ExitCode(ee.ProcessState))
		if text, _ := stderr.text(); strings.TrimSpace(text) != "" {
			msg += ": " + strings.TrimSpace(text)
		}
		return errors.New(msg)
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return fmt.Errorf("agent command: %w", err)
	}
	return nil
}

var _ executor.Agent = (*CommandAgent)(nil)
