package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// renew is the tests' Options.FileRenew, below the test tokens' hour.
const renew = 30 * time.Minute

// fakeViews mints one view per call, its token naming the session, the
// epoch and a serial number.
type fakeViews struct {
	mu sync.Mutex
	n  int
}

func (f *fakeViews) For(sessionID string, epoch int64) ([]proto.FsView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return []proto.FsView{{View: "workspace", Path: "/workspace", ServiceURL: "http://baton/v1/fs/" + sessionID + "/workspace",
		Token: fmt.Sprintf("tok %s %d %d", sessionID, epoch, f.n)}}, nil
}

func withFiles(o *Options) {
	o.Files, o.FileRenew = &fakeViews{}, renew
	longLeases(o)
}

var fsCaps = proto.Capabilities{Process: &proto.ProcessCapability{}, FS: &proto.FSCapability{Fuse: true}}

// fsShell registers executor id of mch_1 with a shell and fs, resuming
// held sessions when given.
func (e *env) fsShell(t *testing.T, id string, caps proto.Capabilities, held ...proto.SessionEpoch) *texec {
	t.Helper()
	x := e.dial(t, e.machineToken("mch_1", "cred_m"))
	p := proto.RegisterParams{ExecutorID: id, Capabilities: caps}
	if held != nil {
		p.Resume = &proto.Resume{ExecutorID: id, ActiveSessions: held}
	}
	x.register(p)
	return x
}

// expectMount answers the next fs.mount (with err, when not nil) and
// returns its params; the token must be minted for area at the params'
// epoch.
func (x *texec) expectMount(area string, err *proto.Error) proto.FsMountParams {
	x.t.Helper()
	var p proto.FsMountParams
	f := x.expect(proto.MethodFsMount, &p)
	if err != nil {
		x.replyErr(f, err)
	} else {
		x.reply(f, proto.FsMountResult{Mounted: []string{"workspace"}})
	}
	if len(p.Views) != 1 || !strings.HasPrefix(p.Views[0].Token, fmt.Sprintf("tok %s %d ", area, p.Epoch)) ||
		p.Views[0].ServiceURL != "http://baton/v1/fs/"+area+"/workspace" {
		x.t.Fatalf("fs.mount %+v: views not of %s at epoch %d", p, area, p.Epoch)
	}
	return p
}

// epochs reports what the file service hears about epoch of area.
func epochs(h *Hub, area string, epoch int64) string {
	cur, ok := h.CurrentEpoch(area)
	current, bound := h.IsCurrentEpoch(area, epoch)
	return fmt.Sprintf("current=%d/%v epoch %d: %v/%v", cur, ok, epoch, current, bound)
}

// TestShellMountsFiles: a sandbox started for a session gets its files
// mounted for the binding's epoch, renewed before the tokens run out and
// again after a resume (a new epoch, so the old one is no longer
// current), and unmounted with flush before session.stop.
func TestShellMountsFiles(t *testing.T) {
	e := newEnv(t, withFiles)
	s := NewShell(e.hub, nil)
	defer s.Close()
	x := e.fsShell(t, "exe_m", fsCaps)

	started := make(chan string, 1)
	go func() {
		id, err := s.StartFor(context.Background(), "ses_1", "executor:mch_1")
		if err != nil {
			t.Error(err)
		}
		started <- id
	}()
	ap := x.accept()
	mp := x.expectMount("ses_1", nil)
	id := wait(t, started)
	if mp.SessionID != id || ap.SessionID != id || mp.Epoch != ap.Epoch {
		t.Fatalf("fs.mount %+v for sandbox %s assigned at %d", mp, id, ap.Epoch)
	}
	ep := ap.Epoch
	if want := "/sessions/" + id + "/workspace"; mp.Views[0].Path != want {
		t.Errorf("view path %q, want %q: below the sandbox's own directory", mp.Views[0].Path, want)
	}
	// Its commands run in the workspace view by default.
	done := s.execAsync(id, "cat a.txt", baton.ExecOptions{})
	if in := x.answerExec(`{"stdout":"a","stderr":"","exit_code":0}`, false); in["cwd"] != mp.Views[0].Path {
		t.Errorf("process.exec input %v: want cwd %s", in, mp.Views[0].Path)
	}
	if r := <-done; r.err != nil || r.res.Stdout != "a" {
		t.Errorf("exec: %+v", r)
	}
	if got, want := epochs(e.hub, "ses_1", ep), fmt.Sprintf("current=%d/true epoch %d: true/true", ep, ep); got != want {
		t.Errorf("file service: %s, want %s", got, want)
	}
	if got := epochs(e.hub, "ses_2", ep); got != fmt.Sprintf("current=0/false epoch %d: false/false", ep) {
		t.Errorf("another session: %s", got)
	}

	// Before the tokens run out, the same views come again with new ones.
	e.clock.WaitArmed(t, renew)
	e.clock.Advance(renew)
	again := x.expectMount("ses_1", nil)
	if again.Epoch != ep || again.Views[0].Token == mp.Views[0].Token {
		t.Fatalf("renewal %+v after %+v", again, mp)
	}

	// A resume moves the binding to a new epoch: the views are mounted
	// again for it, and the old epoch's tokens are refused.
	x.kill()
	e.clock.WaitArmed(t, window)
	y := e.fsShell(t, "exe_m", fsCaps, proto.SessionEpoch{SessionID: id, Epoch: ep})
	var rp proto.AssignParams
	y.reply(y.expect(proto.MethodSessionAssign, &rp), proto.Accepted{Accepted: true})
	resumed := y.expectMount("ses_1", nil)
	if resumed.SessionID != id || resumed.Epoch != rp.Epoch || rp.Epoch <= ep {
		t.Fatalf("fs.mount after resume %+v (re-assigned at %d, was %d)", resumed, rp.Epoch, ep)
	}
	if got, want := epochs(e.hub, "ses_1", ep), fmt.Sprintf("current=%d/true epoch %d: false/true", rp.Epoch, ep); got != want {
		t.Errorf("file service after resume: %s, want %s", got, want)
	}

	// Stop flushes and unmounts first, then stops the session.
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background(), id) }()
	var up proto.FsUnmountParams
	y.reply(y.expect(proto.MethodFsUnmount, &up), proto.FsUnmountResult{Status: "unmounted"})
	var sp proto.SessionStopParams
	y.reply(y.expect(proto.MethodSessionStop, &sp), proto.SessionStopResult{Stopped: true})
	if err := wait(t, stopped); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(proto.FsUnmountParams{SessionID: id, Flush: true}, up); diff != "" || sp.SessionID != id {
		t.Errorf("fs.unmount (-want +got):\n%s\nsession.stop %+v", diff, sp)
	}
	if _, ok := e.hub.CurrentEpoch("ses_1"); ok {
		t.Error("the file service still checks the epoch of a stopped sandbox")
	}
}

// TestShellMountRefused: a mount the executor refuses fails the start
// and stops the sandbox; an executor without capabilities.fs gets no
// fs.mount (nor fs.unmount), and neither does a sandbox started without a
// session.
func TestShellMountRefused(t *testing.T) {
	e := newEnv(t, withFiles)
	s := NewShell(e.hub, nil)
	defer s.Close()
	x := e.fsShell(t, "exe_m", fsCaps)

	failed := make(chan error, 1)
	go func() {
		_, err := s.StartFor(context.Background(), "ses_1", "executor:mch_1")
		failed <- err
	}()
	ap := x.accept()
	x.expectMount("ses_1", proto.Errorf(proto.CodeInternal, "mount view workspace at /workspace: no FUSE").WithData(proto.ErrorData{Reason: "mount_failed"}))
	var up proto.FsUnmountParams
	x.reply(x.expect(proto.MethodFsUnmount, &up), proto.FsUnmountResult{Status: "unmounted"})
	var sp proto.SessionStopParams
	x.reply(x.expect(proto.MethodSessionStop, &sp), proto.SessionStopResult{Stopped: true})
	if err := wait(t, failed); err == nil || !strings.Contains(err.Error(), "no FUSE") || !strings.Contains(err.Error(), "mount_failed") {
		t.Fatalf("start: %v", err)
	}
	if up.SessionID != ap.SessionID || sp.SessionID != ap.SessionID || s.Owns(ap.SessionID) {
		t.Fatalf("fs.unmount %+v, session.stop %+v of %s", up, sp, ap.SessionID)
	}
	x.kill()

	y := e.fsShell(t, "exe_n", proto.Capabilities{Process: &proto.ProcessCapability{}})
	for _, session := range []string{"ses_1", ""} {
		started := make(chan string, 1)
		go func() {
			id, err := s.StartFor(context.Background(), session, "executor:mch_1")
			if err != nil {
				t.Error(err)
			}
			started <- id
		}()
		y.accept()
		id := wait(t, started)
		go func() { failed <- s.Stop(context.Background(), id) }()
		y.reply(y.expect(proto.MethodSessionStop, nil), proto.SessionStopResult{Stopped: true})
		if err := wait(t, failed); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAgentMountsFiles: a brain session gets its files mounted after its
// first turn.start (not again for the next turn), again after a resume,
// and unmounted with flush before session.close.
func TestAgentMountsFiles(t *testing.T) {
	e := newEnv(t, withFiles)
	e.hub.Attach(newSink())
	caps := proto.Capabilities{Agent: &proto.AgentCapability{}, FS: &proto.FSCapability{Fuse: true}}
	x := e.fsShell(t, "exe_a", caps)

	p := e.startOn(t, x, turnOf("ses_1", "trn_1"))
	mp := x.expectMount("ses_1", nil)
	if mp.SessionID != "ses_1" || mp.Epoch != p.Metadata.Epoch || mp.Views[0].Path != "/sessions/ses_1/workspace" || p.Metadata.WorkspacePath != mp.Views[0].Path {
		t.Fatalf("fs.mount %+v after turn.start at epoch %d", mp, p.Metadata.Epoch)
	}
	if got, want := epochs(e.hub, "ses_1", mp.Epoch), fmt.Sprintf("current=%d/true epoch %d: true/true", mp.Epoch, mp.Epoch); got != want {
		t.Errorf("file service: %s, want %s", got, want)
	}
	// The next turn goes out alone.
	done := e.startAsync(turnOf("ses_1", "trn_2"))
	x.reply(x.expect(proto.MethodTurnStart, nil), proto.TurnStartResult{Accepted: true})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}

	x.kill()
	e.clock.WaitArmed(t, window)
	e.clock.Advance(time.Second) // the renewal armed by the next mount is told from the first one's
	y := e.fsShell(t, "exe_a", caps, proto.SessionEpoch{SessionID: "ses_1", Epoch: mp.Epoch, AckedSequence: ptr(int64(0))})
	resumed := y.expectMount("ses_1", nil)
	if resumed.SessionID != "ses_1" || resumed.Epoch <= mp.Epoch {
		t.Fatalf("fs.mount after resume %+v (was epoch %d)", resumed, mp.Epoch)
	}
	if current, _ := e.hub.IsCurrentEpoch("ses_1", mp.Epoch); current {
		t.Error("the epoch before the resume is still current")
	}

	// Renewal: the same views with fresh tokens.
	e.clock.WaitArmedNow(t, renew)
	e.clock.Advance(renew)
	if again := y.expectMount("ses_1", nil); again.Epoch != resumed.Epoch || again.Views[0].Token == resumed.Views[0].Token {
		t.Fatalf("renewal %+v after %+v", again, resumed)
	}

	e.hub.CloseAgent("ses_1")
	var up proto.FsUnmountParams
	y.reply(y.expect(proto.MethodFsUnmount, &up), proto.FsUnmountResult{Status: "unmounted"})
	var cp proto.SessionCloseParams
	y.reply(y.expect(proto.MethodSessionClose, &cp), proto.SessionCloseResult{Closed: true})
	if diff := cmp.Diff(proto.FsUnmountParams{SessionID: "ses_1", Flush: true}, up); diff != "" || cp.SessionID != "ses_1" {
		t.Errorf("fs.unmount (-want +got):\n%s\nsession.close %+v", diff, cp)
	}
	if _, ok := e.hub.CurrentEpoch("ses_1"); ok {
		t.Error("the file service still checks the epoch of an unmounted brain session")
	}
}

// TestAgentUnmountAfterResume: a brain session closed while its executor
// is away gets, on the resume, its views mounted for the new epoch first
// (so the flush's uploads are taken), then fs.unmount, then
// session.close.
func TestAgentUnmountAfterResume(t *testing.T) {
	e := newEnv(t, withFiles)
	e.hub.Attach(newSink())
	caps := proto.Capabilities{Agent: &proto.AgentCapability{}, FS: &proto.FSCapability{Fuse: true}}
	x := e.fsShell(t, "exe_a", caps)
	e.startOn(t, x, turnOf("ses_1", "trn_1"))
	mp := x.expectMount("ses_1", nil)
	x.kill()
	e.clock.WaitArmed(t, window)
	e.hub.CloseAgent("ses_1")

	y := e.fsShell(t, "exe_a", caps, proto.SessionEpoch{SessionID: "ses_1", Epoch: mp.Epoch, AckedSequence: ptr(int64(0))})
	var got []string
	for _, m := range []string{proto.MethodFsMount, proto.MethodFsUnmount, proto.MethodSessionClose} {
		f := y.next()
		got = append(got, f.Method)
		switch m {
		case proto.MethodFsMount:
			y.reply(f, proto.FsMountResult{Mounted: []string{"workspace"}})
		case proto.MethodFsUnmount:
			y.reply(f, proto.FsUnmountResult{Status: "unmounted"})
		default:
			y.reply(f, proto.SessionCloseResult{Closed: true})
		}
	}
	if diff := cmp.Diff([]string{proto.MethodFsMount, proto.MethodFsUnmount, proto.MethodSessionClose}, got); diff != "" {
		t.Fatalf("requests after the resume (-want +got):\n%s", diff)
	}
}

// TestMountNeedsFuse: fs.mount needs the capability fs.fuse (bma.executor.v1.1):
// an executor declaring fs {fuse: false} gets no fs.mount, neither for a
// remote shell nor for a brain, and a brain's turn.start names no
// workspace.
func TestMountNeedsFuse(t *testing.T) {
	e := newEnv(t, withFiles)
	e.hub.Attach(newSink())
	noFuse := &proto.FSCapability{Fuse: false}
	s := NewShell(e.hub, nil)
	defer s.Close()
	x := e.fsShell(t, "exe_m", proto.Capabilities{Process: &proto.ProcessCapability{}, FS: noFuse})
	started := make(chan string, 1)
	go func() {
		id, err := s.StartFor(context.Background(), "ses_1", "executor:mch_1")
		if err != nil {
			t.Error(err)
		}
		started <- id
	}()
	x.accept()
	id := wait(t, started)
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background(), id) }()
	x.reply(x.expect(proto.MethodSessionStop, nil), proto.SessionStopResult{Stopped: true}) // not fs.mount, nor fs.unmount
	if err := wait(t, stopped); err != nil {
		t.Fatal(err)
	}

	y := e.fsShell(t, "exe_a", proto.Capabilities{Agent: &proto.AgentCapability{}, FS: noFuse})
	if p := e.startOn(t, y, turnOf("ses_2", "trn_1")); p.Metadata.WorkspacePath != "" {
		t.Errorf("turn.start names workspace %q without fs.fuse", p.Metadata.WorkspacePath)
	}
	e.hub.CloseAgent("ses_2")
	y.reply(y.expect(proto.MethodSessionClose, nil), proto.SessionCloseResult{Closed: true}) // not fs.mount, nor fs.unmount
	if _, ok := e.hub.CurrentEpoch("ses_2"); ok {
		t.Error("the file service checks the epoch of a brain without mounted files")
	}
}
