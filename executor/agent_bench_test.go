package executor

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
)

// nopSink takes every agent report.
type nopSink struct{}

func (nopSink) AgentEvent(context.Context, *baton.AgentEvent) error              { return nil }
func (nopSink) AgentDelta(*baton.AgentDelta)                                     {}
func (nopSink) Interaction(context.Context, *baton.Interaction) error            { return nil }
func (nopSink) InteractionEnded(context.Context, string, string, string, string) {}
func (nopSink) AgentLost(string, error)                                          {}

// BenchmarkAgentEventRoundTrip measures an agent executor's durable
// session.event through the hub (epoch and sequence checks, dedupe, the
// sink) and back as its acknowledgement, over loopback WebSocket.
func BenchmarkAgentEventRoundTrip(b *testing.B) {
	h, url, tokens := benchHub(b, time.Hour)
	h.Attach(nopSink{})
	tok := tokens.add("bae_ext_agent", baton.ExecutorGrant{Scope: baton.ExecutorScopeMachine, MachineID: "mch_1", CredentialID: "c", ExpiresAt: time.Now().Add(time.Hour)})
	var epoch atomic.Int64 // set by the executor's reader
	ex := peer.New(benchDial(b, url, tok), peer.Options{Handler: func(_ context.Context, f *proto.Frame) (any, error) {
		if f.Method == proto.MethodTurnStart {
			var p proto.TurnStartParams
			_ = f.Bind(&p)
			epoch.Store(p.Metadata.Epoch)
			return proto.TurnStartResult{Accepted: true}, nil
		}
		return proto.Ack{OK: true}, nil
	}})
	ex.Start()
	b.Cleanup(func() { ex.Kill(); <-ex.Done() })
	ctx := context.Background()
	if err := ex.Call(ctx, proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11,
		Capabilities: proto.Capabilities{Agent: &proto.AgentCapability{}}}, nil); err != nil {
		b.Fatal(err)
	}
	if err := h.StartTurn(ctx, &baton.BrainTurn{SessionID: "ses_bench", MachineID: "mch_1", TurnID: "trn_1"}); err != nil {
		b.Fatal(err)
	}
	ep := epoch.Load()
	ev := json.RawMessage(`{"type":"agent.message","content":[{"type":"text","text":"hello"}]}`)
	var res proto.SessionEventResult
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq := int64(i + 1)
		p := proto.SessionEventParams{SessionID: "ses_bench", Epoch: ep, TurnID: "trn_1", EventID: "evt_" + strconv.Itoa(i), Sequence: &seq, Event: ev}
		if err := ex.Call(ctx, proto.MethodSessionEvent, p, &res); err != nil {
			b.Fatal(err)
		}
	}
}
