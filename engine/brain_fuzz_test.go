package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

// FuzzAgentPayload: whatever an executor sends, the stored event has a
// type an executor may write (never one of the server's own) and an object
// payload naming its turn and event.
func FuzzAgentPayload(f *testing.F) {
	f.Add("agent.message", `{"type":"agent.message","content":[{"type":"text","text":"hi"}]}`)
	f.Add("session.status_idle", `{"type":"session.status_idle","turn_outcome":"completed"}`)
	f.Add("session.close", `{"type":"session.close","reason":"x"}`)
	f.Add("agent.custom", `{"type":"agent.custom","turn_id":"forged"}`)
	f.Add("x", `[]`)
	f.Add("x", `null`)
	f.Fuzz(func(t *testing.T, typ, raw string) {
		ev := &baton.AgentEvent{TurnID: "trn_1", EventID: "evt_1", Type: typ, Event: json.RawMessage(raw)}
		stored, fields, err := agentPayload(ev)
		if err != nil {
			return
		}
		if !strings.HasPrefix(stored, "agent.") && stored != "session.status_running" && stored != "session.status_idle" {
			t.Fatalf("stored as %q", stored)
		}
		b, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			TurnID  string `json:"turn_id"`
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(b, &back); err != nil || back.TurnID != "trn_1" || back.EventID != "evt_1" {
			t.Fatalf("payload %s", b)
		}
	})
}

// FuzzParseAnswer: an accepted answer says something, and a decision is
// allow or deny.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{`"blue"`, `""`, `{"decision":"allow"}`, `{"decision":"maybe"}`, `{"text":""}`, `{}`, `null`, `[1]`, `{"decision":"deny","text":"no"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := parseAnswer(json.RawMessage(raw))
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeInvalidParams {
				t.Fatalf("error code %q", baton.ErrorCode(err))
			}
			return
		}
		if a.Decision != "" && a.Decision != "allow" && a.Decision != "deny" {
			t.Fatalf("decision %q", a.Decision)
		}
		if a.Decision == "" && a.Text == "" {
			t.Fatalf("accepted an empty answer %q", raw)
		}
	})
}
