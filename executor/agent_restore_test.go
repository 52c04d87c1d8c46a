package executor

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// TestAgentRestoreAfterHarnessRestart: a hub that restarted takes back
// the interactions the engine rebuilt from the log (answerable once, and
// still expiring) and holds the answers and custom tool results for a
// session it does not know until the executor resumes it.
func TestAgentRestoreAfterHarnessRestart(t *testing.T) {
	e, sink := brainEnv(t)
	exp := e.clock.Now().Add(time.Minute)
	e.hub.RestoreInteraction("ses_9", "int_1", "ixn_1", "question", "trn_9", "", nil)
	e.hub.RestoreInteraction("ses_9", "int_2", "ixn_2", "question", "trn_9", "", &exp)
	e.hub.RestoreInteraction("ses_9", "int_1", "ixn_other", "question", "trn_9", "", nil) // known: ignored
	if err := e.hub.RespondInteraction("ses_9", "int_1", baton.InteractionAnswer{Text: "blue"}); err != nil {
		t.Fatal(err)
	}
	if err := e.hub.RespondInteraction("ses_9", "int_1", baton.InteractionAnswer{Text: "red"}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("second answer: %v", err)
	}
	if err := e.hub.CustomToolResult("ses_9", "toolu_1", baton.ClientResult{Content: json.RawMessage(`"42"`)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if got := wait(t, sink.ended); got != "int_2 expired " {
		t.Fatalf("ended %q", got)
	}

	y := e.agentExecutor(t, "exe_a", proto.AgentCapability{CustomTools: true},
		&proto.Resume{ExecutorID: "exe_a", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_9", Epoch: 7, AckedSequence: ptr(int64(4))}}})
	got := map[string]proto.InteractionResponseParams{}
	var cr proto.CustomToolResultParams
	for range 3 {
		f := y.next()
		switch f.Method {
		case proto.MethodInteractionResponse:
			var p proto.InteractionResponseParams
			_ = f.Bind(&p)
			got[p.InteractionID] = p
		case proto.MethodCustomToolResult:
			_ = f.Bind(&cr)
		default:
			t.Fatalf("unexpected %s", f.Method)
		}
		y.reply(f, proto.Accepted{Accepted: true})
	}
	if a := got["ixn_1"]; a.Status != baton.InteractionResolved || a.Answer == nil || a.Answer.Text != "blue" {
		t.Fatalf("ixn_1 %+v", a)
	}
	if a := got["ixn_2"]; a.Status != baton.InteractionExpired {
		t.Fatalf("ixn_2 %+v", a)
	}
	if cr.SessionID != "ses_9" || cr.ToolUseID != "toolu_1" || string(cr.Content) != `[{"type":"text","text":"42"}]` {
		t.Fatalf("custom tool result %+v", cr)
	}
	// The executor's own id names the restored interaction again.
	req := interactionReq("ixn_1", "question", "")
	req.SessionID = "ses_9"
	if id := y.platformID(req); id != "int_1" {
		t.Fatalf("platform id %q", id)
	}
	none(t, "interaction", sink.ixs)
}
