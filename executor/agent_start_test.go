package executor

import (
	"errors"
	"testing"

	"github.com/baton-engine/baton/executor/proto"
)

// TestAgentStartLostWithConnection: turn.start reaches the executor,
// which takes the turn, but its connection drops before the answer
// reaches the hub. The executor resumes the session (acked_sequence
// absent: no event was acknowledged yet): the turn runs on — its token
// refresh is served — turn.start goes again on the new connection in the
// new epoch, and StartTurn returns once that is answered.
func TestAgentStartLostWithConnection(t *testing.T) {
	creds := &refreshCreds{}
	e := newEnv(t, longLeases, func(o *Options) { o.Credentials = creds })
	sink := newSink()
	e.hub.Attach(sink)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	done := e.startAsync(turnOf("ses_1", "trn_1"))
	var first proto.TurnStartParams
	x.expect(proto.MethodTurnStart, &first) // taken; the answer is lost
	x.kill()
	e.clock.WaitArmed(t, window)

	y, res := e.agentRegister(t, "exe_a", proto.AgentCapability{}, &proto.Resume{ExecutorID: "exe_a",
		ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: first.Metadata.Epoch}}})
	if len(res.Sessions) != 1 || res.Sessions[0].SessionID != "ses_1" || res.Sessions[0].Epoch <= first.Metadata.Epoch {
		t.Fatalf("register result sessions %+v: want ses_1 at a new epoch", res.Sessions)
	}
	var again proto.TurnStartParams
	f := y.expect(proto.MethodTurnStart, &again)
	if again.SessionID != "ses_1" || again.TurnID != "trn_1" || again.Metadata.Epoch != res.Sessions[0].Epoch {
		t.Fatalf("turn.start again %+v, want trn_1 at epoch %d", again, res.Sessions[0].Epoch)
	}
	var m proto.ModelTokenRefreshResult
	y.ok(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1"}, &m)
	if m.ModelToken == "" {
		t.Fatalf("model refresh %+v", m)
	}
	y.reply(f, proto.TurnStartResult{Accepted: true, ExecutorSessionRef: "ref_ses_1"})
	if err := wait(t, done); err != nil {
		t.Fatalf("StartTurn: %v", err)
	}
	none(t, "lost", sink.lost)
}

// TestAgentStartLostSessionGone: as above, but the executor comes back
// without the session: it never took the turn, and StartTurn fails.
func TestAgentStartLostSessionGone(t *testing.T) {
	e, _ := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	done := e.startAsync(turnOf("ses_1", "trn_1"))
	x.expect(proto.MethodTurnStart, nil)
	x.kill()
	e.clock.WaitArmed(t, window)
	e.agentExecutor(t, "exe_a", proto.AgentCapability{}, &proto.Resume{ExecutorID: "exe_a"})
	if err := wait(t, done); !errors.Is(err, ErrDetached) {
		t.Fatalf("StartTurn: %v, want ErrDetached", err)
	}
	if got := e.hub.BrainEpoch("ses_1"); got != 0 {
		t.Fatalf("brain epoch %d after the loss, want 0 (no agent session)", got)
	}
}
