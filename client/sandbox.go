package client

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// RemoteSandbox is the session's remote sandbox, as started or stopped.
type RemoteSandbox struct {
	SandboxID string
	Image     string
	// StartedAt is when it started; zero when the server could not record
	// it (or for a stop).
	StartedAt time.Time
}

// StartRemoteSandbox starts the session's remote sandbox from image
// (session.startRemoteSandbox). The image must be in the profile's
// available_sandboxes (else *RPCError -32011); one sandbox runs per
// session (a second start is -32000); a failed start is -32012.
func (s *Session) StartRemoteSandbox(ctx context.Context, image string) (*RemoteSandbox, error) {
	var out struct {
		SandboxID string  `json:"sandbox_id"`
		Image     string  `json:"image"`
		StartedAt *string `json:"started_at"`
	}
	if err := s.Call(ctx, "session.startRemoteSandbox", map[string]string{"image": image}, &out); err != nil {
		return nil, err
	}
	r := &RemoteSandbox{SandboxID: out.SandboxID, Image: out.Image}
	if out.StartedAt != nil {
		r.StartedAt, _ = time.Parse(time.RFC3339Nano, *out.StartedAt)
	}
	return r, nil
}

// StopRemoteSandbox stops the session's remote sandbox
// (session.stopRemoteSandbox); without one it is *RPCError -32013.
func (s *Session) StopRemoteSandbox(ctx context.Context) (*RemoteSandbox, error) {
	var out struct {
		SandboxID string `json:"sandbox_id"`
		Image     string `json:"image"`
	}
	if err := s.Call(ctx, "session.stopRemoteSandbox", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &RemoteSandbox{SandboxID: out.SandboxID, Image: out.Image}, nil
}

// ExecRemoteSandbox runs command with sh -c in the session's remote
// sandbox (session.execRemoteSandbox). A non-zero exit is a result;
// without a sandbox it is *RPCError -32013.
func (s *Session) ExecRemoteSandbox(ctx context.Context, command string) (ExecResult, error) {
	var out ExecResult
	err := s.Call(ctx, "session.execRemoteSandbox", map[string]string{"command": command}, &out)
	return out, err
}

// SandboxReport is a local sandbox lifecycle report.
type SandboxReport struct {
	// State is "running", "stopped" or "error".
	State string
	// Image is the container image; "" reports an unsandboxed run
	// (TargetNone): image null, unsandboxed true.
	Image       string
	ContainerID string // "" sends null
	Detail      string // "" sends null
}

// ReportLocalSandbox records a sandbox this client runs itself
// (session.reportLocalSandbox → event session.sandbox.<state>).
func (s *Session) ReportLocalSandbox(ctx context.Context, r SandboxReport) error {
	return s.Call(ctx, "session.reportLocalSandbox", struct {
		State       string  `json:"state"`
		Image       *string `json:"image"`
		Unsandboxed bool    `json:"unsandboxed"`
		ContainerID *string `json:"container_id"`
		Detail      *string `json:"detail"`
	}{r.State, orNull(r.Image), r.Image == "", orNull(r.ContainerID), orNull(r.Detail)}, nil)
}

// reportSandbox is ReportLocalSandbox, best effort: a failure is logged.
func (s *Session) reportSandbox(ctx context.Context, r SandboxReport) {
	if err := s.ReportLocalSandbox(ctx, r); err != nil {
		s.h.c.log.DebugContext(ctx, "client: report local sandbox", "state", r.State, "err", err)
	}
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// execLocal runs command in the session's local container of image,
// starting it on first use.
func (s *Session) execLocal(ctx context.Context, engine, image, command string, timeout time.Duration, max int) (ExecResult, error) {
	bx := s.builtin.box(engineCLI(engine), image)
	id, err := bx.start(ctx, s)
	if err != nil {
		return ExecResult{}, err
	}
	out, err := runProc(ctx, procSpec{prog: bx.cli.prog(), args: []string{"exec", id, "sh", "-c", command}, timeout: timeout, max: max})
	if err != nil {
		err = bx.cli.ranErr(err)
		s.reportSandbox(ctx, SandboxReport{State: "error", Image: image, ContainerID: id, Detail: err.Error()})
		return ExecResult{}, err
	}
	return execResult(out), nil
}

// boxKey names a local container: the CLI that runs it and its image.
type boxKey struct {
	cli   engineCLI
	image string
}

// box is a local container of a session, started once on first use.
type box struct {
	cli   engineCLI
	image string

	mu sync.Mutex // held while starting
	id string
}

// box returns the session's container entry for cli and image.
func (b *builtin) box(cli engineCLI, image string) *box {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := boxKey{cli, image}
	if b.boxes == nil {
		b.boxes = map[boxKey]*box{}
	}
	bx := b.boxes[k]
	if bx == nil {
		bx = &box{cli: cli, image: image}
		b.boxes[k] = bx
	}
	return bx
}

// start returns the container's id, starting it (pulling the image when
// missing) and reporting running on first use, or error on failure.
func (bx *box) start(ctx context.Context, s *Session) (string, error) {
	bx.mu.Lock()
	defer bx.mu.Unlock()
	if bx.id != "" {
		return bx.id, nil
	}
	id, err := bx.cli.start(ctx, bx.image)
	if err != nil {
		s.reportSandbox(ctx, SandboxReport{State: "error", Image: bx.image, Detail: err.Error()})
		return "", err
	}
	bx.id = id
	s.reportSandbox(ctx, SandboxReport{State: "running", Image: bx.image, ContainerID: id})
	return id, nil
}

// stop stops a started container, reporting stopped or error.
func (bx *box) stop(ctx context.Context, s *Session) {
	bx.mu.Lock()
	id := bx.id
	bx.id = ""
	bx.mu.Unlock()
	if id == "" {
		return
	}
	if err := bx.cli.stop(ctx, id); err != nil {
		s.reportSandbox(ctx, SandboxReport{State: "error", Image: bx.image, ContainerID: id, Detail: err.Error()})
		return
	}
	s.reportSandbox(ctx, SandboxReport{State: "stopped", Image: bx.image, ContainerID: id})
}

// engineCLI is a container CLI: "" or a docker binary, or Apple's
// "container".
type engineCLI string

func (e engineCLI) prog() string {
	if e == "" {
		return "docker"
	}
	return string(e)
}

// apple reports whether the CLI is Apple's container, whose image verbs
// differ from docker's.
func (e engineCLI) apple() bool { return filepath.Base(e.prog()) == "container" }

// run runs one CLI command to its end.
func (e engineCLI) run(ctx context.Context, args ...string) (procOut, error) {
	out, err := runProc(ctx, procSpec{prog: e.prog(), args: args})
	if err != nil {
		return out, e.ranErr(err)
	}
	return out, nil
}

// ranErr names the CLI in a failure to run it.
func (e engineCLI) ranErr(err error) error {
	if isTimeout(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("failed to run %q: %w", e.prog(), err)
}

// start makes sure image is present (inspect, else pull) and starts a
// container of it that stays up (sleep infinity) and removes itself when
// stopped.
func (e engineCLI) start(ctx context.Context, image string) (string, error) {
	inspect, pull := []string{"image", "inspect"}, []string{"pull"}
	if e.apple() {
		inspect, pull = []string{"images", "inspect"}, []string{"images", "pull"}
	}
	out, err := e.run(ctx, append(inspect, image)...)
	if err != nil {
		return "", err
	}
	if out.exit != 0 {
		if out, err = e.run(ctx, append(pull, image)...); err != nil {
			return "", err
		}
		if out.exit != 0 {
			return "", fmt.Errorf("sandbox image %q error: %s", image, detail(out))
		}
	}
	out, err = e.run(ctx, "run", "-d", "--rm", image, "sleep", "infinity")
	if err != nil {
		return "", err
	}
	if out.exit != 0 {
		return "", fmt.Errorf("sandbox runtime error: %s run %q failed: %s", e.prog(), image, detail(out))
	}
	id := strings.TrimSpace(out.stdout)
	if id == "" {
		return "", fmt.Errorf("sandbox runtime error: %s run %q printed no container id", e.prog(), image)
	}
	return id, nil
}

// stop stops container id; one that is already gone is stopped.
func (e engineCLI) stop(ctx context.Context, id string) error {
	out, err := e.run(ctx, "stop", id)
	if err != nil {
		return err
	}
	if out.exit != 0 {
		msg := strings.ToLower(out.stderr)
		if strings.Contains(msg, "no such container") || strings.Contains(msg, "not found") {
			return nil
		}
		return fmt.Errorf("sandbox runtime error: %s stop %s failed: %s", e.prog(), id, detail(out))
	}
	return nil
}

// detail is a failed CLI command's message: its trimmed stderr (stdout
// when stderr is blank), at most 1024 bytes plus "…".
func detail(o procOut) string {
	d := strings.TrimSpace(o.stderr)
	if d == "" {
		d = strings.TrimSpace(o.stdout)
	}
	if len(d) > 1024 {
		cut, _ := cutUTF8([]byte(d), 1024)
		d = string(cut) + "…"
	}
	return d
}
