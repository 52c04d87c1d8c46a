package engine_test

import (
	"testing"

	"github.com/baton-engine/baton"
)

// TestBrainCancelTwice: a second cancelTurn while the first is still on
// its way succeeds again without a second turn.cancel; once the turn is
// over, cancelTurn has nothing to cancel.
func TestBrainCancelTwice(t *testing.T) {
	r := newBrainRig(t)
	turn := r.send(r.owner, "hello")
	st := got(t, r.b.starts)
	if err := r.e.CancelTurn(r.ctx, r.owner); err != nil {
		t.Fatal(err)
	}
	if c := got(t, r.b.cancels); c != st.TurnID {
		t.Fatalf("turn.cancel %s", c)
	}
	if err := r.e.CancelTurn(r.ctx, r.other); err != nil {
		t.Fatalf("second cancel while the first is on its way: %v", err)
	}
	select {
	case c := <-r.b.cancels:
		t.Fatalf("a second turn.cancel %s", c)
	default:
	}
	r.emit(st.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"canceled"`)
	if s := text(t, result(t, turn)); s != "The turn was cancelled." {
		t.Fatalf("cancelled reply %q", s)
	}
	if err := r.e.CancelTurn(r.ctx, r.owner); baton.ErrorCode(err) != baton.ECodeNoTurn {
		t.Fatalf("cancel after the turn ended: %v", err)
	}
}
