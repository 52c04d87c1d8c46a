package executor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// refreshCreds is a baton.TurnCredentials for the refresh handlers: each
// Issue returns new tokens (tools ones unless noTools), or err.
type refreshCreds struct {
	mu      sync.Mutex
	n       int
	asked   []string // "session turn machine epoch"
	noTools bool
	err     error
}

func (c *refreshCreds) Issue(_ context.Context, sessionID, turnID, machineID string, epoch int64) (baton.TurnMetadata, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, fmt.Sprintf("%s %s %s %d", sessionID, turnID, machineID, epoch))
	if c.err != nil {
		return baton.TurnMetadata{}, c.err
	}
	c.n++
	md := baton.TurnMetadata{
		ModelBaseURL: "http://baton/v1/model", ModelToken: fmt.Sprintf("bae_mdt_%d", c.n), ModelTokenExpiresAt: t0.Add(time.Hour),
	}
	if !c.noTools {
		md.ToolsMCPURL, md.ToolsMCPToken = "http://baton/v1/sessions/"+sessionID+"/mcp", fmt.Sprintf("bae_tlt_%d", c.n)
	}
	return md, nil
}

func (c *refreshCreds) set(noTools bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noTools, c.err = noTools, err
}

func (c *refreshCreds) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.asked) == 0 {
		return ""
	}
	return c.asked[len(c.asked)-1]
}

// wantRPC fails unless e has the code and data.reason.
func wantRPC(t *testing.T, what string, e *proto.Error, code int, reason string) {
	t.Helper()
	if e.Code != code || e.Detail().Reason != reason {
		t.Errorf("%s: %d %q (%s), want %d %q", what, e.Code, e.Detail().Reason, e.Message, code, reason)
	}
}

func TestTurnTokenRefresh(t *testing.T) {
	creds := &refreshCreds{}
	e := newEnv(t, longLeases, func(o *Options) { o.Credentials = creds })
	sink := newSink()
	e.hub.Attach(sink)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	p := e.startOn(t, x, turnOf("ses_1", "trn_1"))
	epoch := p.Metadata.Epoch

	var m1, m2 proto.ModelTokenRefreshResult
	x.ok(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1"}, &m1)
	if m1.ModelToken == "" || m1.ModelToken == p.Metadata.ModelToken || !m1.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("model refresh %+v", m1)
	}
	if got, want := creds.last(), fmt.Sprintf("ses_1 trn_1 mch_1 %d", epoch); got != want {
		t.Errorf("issued for %q, want %q", got, want)
	}
	// Not idempotent: a repeat gets a new token.
	x.ok(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1"}, &m2)
	if m2.ModelToken == m1.ModelToken {
		t.Errorf("a repeat returned the same token %q", m2.ModelToken)
	}
	var tr proto.ToolsTokenRefreshResult
	x.ok(proto.MethodToolsTokenRefresh, proto.ToolsTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1", Epoch: epoch}, &tr)
	if tr.ToolsMCPToken == "" || tr.ToolsMCPToken == p.Metadata.ToolsMCPToken || !tr.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("tools refresh %+v", tr)
	}

	// Errors, each with its code and data.reason.
	refreshModel := func(session, turn string) *proto.Error {
		return x.fails(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: session, TurnID: turn})
	}
	refreshTools := func(session, turn string, ep int64) *proto.Error {
		return x.fails(proto.MethodToolsTokenRefresh, proto.ToolsTokenRefreshParams{SessionID: session, TurnID: turn, Epoch: ep})
	}
	wantRPC(t, "unknown session", refreshModel("ses_nope", "trn_1"), proto.CodeForbidden, proto.ReasonForbidden)
	wantRPC(t, "unknown turn", refreshModel("ses_1", "trn_nope"), proto.CodeForbidden, proto.ReasonForbidden)
	wantRPC(t, "unknown session (tools)", refreshTools("ses_nope", "trn_1", epoch), proto.CodeForbidden, proto.ReasonForbidden)
	wantRPC(t, "future epoch", refreshTools("ses_1", "trn_1", epoch+1), proto.CodeTurnInactive, proto.ReasonTurnInactive)

	// The executor reconnects and resumes: the turn runs on in a new
	// epoch, which the register result tells, and the old one gets no
	// further tools token.
	x, res := e.agentRegister(t, "exe_a", proto.AgentCapability{}, &proto.Resume{ExecutorID: "exe_a",
		ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: epoch}}})
	old := epoch
	epoch = e.hub.BrainEpoch("ses_1")
	if epoch <= old || len(res.Sessions) != 1 || res.Sessions[0].SessionID != "ses_1" || res.Sessions[0].Epoch != epoch {
		t.Fatalf("epoch %d after resume (was %d), register result sessions %+v", epoch, old, res.Sessions)
	}
	wantRPC(t, "superseded epoch", refreshTools("ses_1", "trn_1", old), proto.CodeTurnInactive, proto.ReasonTurnInactive)
	x.ok(proto.MethodToolsTokenRefresh, proto.ToolsTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1", Epoch: epoch}, nil)
	if got, want := creds.last(), fmt.Sprintf("ses_1 trn_1 mch_1 %d", epoch); got != want {
		t.Errorf("issued for %q, want %q", got, want)
	}
	if e := refreshTools("ses_1", "trn_1", 0); e.Code != proto.CodeInvalidParams {
		t.Errorf("no epoch: %v", e)
	}
	if e := refreshModel("", "trn_1"); e.Code != proto.CodeInvalidParams {
		t.Errorf("no session: %v", e)
	}

	creds.set(true, nil)
	wantRPC(t, "no tools token", refreshTools("ses_1", "trn_1", epoch), proto.CodeCapabilityMissing, ReasonToolsTokenUnavailable)
	x.ok(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1"}, nil)
	creds.set(false, baton.Errorf(baton.ECodeForbidden, "the turn is not active"))
	wantRPC(t, "engine says inactive", refreshModel("ses_1", "trn_1"), proto.CodeTurnInactive, proto.ReasonTurnInactive)
	wantRPC(t, "engine says inactive (tools)", refreshTools("ses_1", "trn_1", epoch), proto.CodeTurnInactive, proto.ReasonTurnInactive)
	creds.set(false, baton.Errorf(baton.ECodeUnavailable, "no origin"))
	wantRPC(t, "no credentials", refreshModel("ses_1", "trn_1"), proto.CodeCapabilityMissing, ReasonModelTokenUnavailable)
	creds.set(false, nil)

	// Another executor — of the same machine, or an environment's — is
	// refused.
	y := e.agentExecutor(t, "exe_b", proto.AgentCapability{}, nil)
	if e := y.fails(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1"}); true {
		wantRPC(t, "other executor", e, proto.CodeForbidden, proto.ReasonForbidden)
	}
	z := e.dial(t, e.envToken("env_1", "cred_2"))
	z.register(proto.RegisterParams{EnvironmentID: "env_1", Capabilities: tools("t")})
	wantRPC(t, "environment executor", z.fails(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1"}),
		proto.CodeForbidden, proto.ReasonForbidden)

	// The turn ends: no further tokens.
	x.acked(agentEvent("ses_1", epoch, "trn_1", "evt_1", 1, `{"type":"session.status_idle","turn_outcome":"completed"}`))
	wait(t, sink.events)
	wantRPC(t, "ended turn", refreshModel("ses_1", "trn_1"), proto.CodeTurnInactive, proto.ReasonTurnInactive)
	wantRPC(t, "ended turn (tools)", refreshTools("ses_1", "trn_1", epoch), proto.CodeTurnInactive, proto.ReasonTurnInactive)

	// A new turn of the session refreshes again.
	e.startOn(t, x, turnOf("ses_1", "trn_2"))
	x.ok(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_2"}, nil)
}

func TestTurnTokenRefreshUnavailable(t *testing.T) {
	e := newEnv(t, longLeases) // no Credentials
	e.hub.Attach(newSink())
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	p := e.startOn(t, x, turnOf("ses_1", "trn_1"))
	wantRPC(t, "model", x.fails(proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1"}),
		proto.CodeCapabilityMissing, ReasonModelTokenUnavailable)
	wantRPC(t, "tools", x.fails(proto.MethodToolsTokenRefresh, proto.ToolsTokenRefreshParams{SessionID: "ses_1", TurnID: "trn_1", Epoch: p.Metadata.Epoch}),
		proto.CodeCapabilityMissing, ReasonToolsTokenUnavailable)
}
