package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// settings is an in-memory baton.SettingStore.
type settings struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *settings) EnsureSetting(_ context.Context, name, value string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	if v, ok := s.m[name]; ok {
		return v, nil
	}
	s.m[name] = value
	return value, nil
}

// toolCall is one CallSessionTool the fake engine saw.
type toolCall struct {
	SessionID, Actor, Name string
	Input                  json.RawMessage
}

// fakeEngine is the gateway's Engine: turns are active when the test says
// so, model calls answer from a queue (or with err), tools come from a
// list.
type fakeEngine struct {
	mu      sync.Mutex
	active  map[string]string // "session/turn" → actor
	offers  bool
	replies []*baton.ProviderResponse
	err     error
	reqs    []*baton.ProviderRequest
	actors  []string
	tools   []baton.ToolDef
	calls   []toolCall
	result  json.RawMessage
	isErr   bool
	callErr error
}

func newFakeEngine() *fakeEngine { return &fakeEngine{active: map[string]string{}} }

func (f *fakeEngine) activate(session, turn, actor string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active[session+"/"+turn] = actor
}

func (f *fakeEngine) end(session, turn string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.active, session+"/"+turn)
}

func (f *fakeEngine) push(r *baton.ProviderResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, r)
}

func (f *fakeEngine) TurnActive(_ context.Context, session, turn string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.active[session+"/"+turn]
	return ok, nil
}

func (f *fakeEngine) TurnActor(session, turn string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.active[session+"/"+turn]
	return a, ok
}

func (f *fakeEngine) OffersTools(context.Context, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offers, nil
}

func (f *fakeEngine) ModelCall(_ context.Context, _, actor string, req *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	f.actors = append(f.actors, actor)
	if f.err != nil {
		return nil, f.err
	}
	if len(f.replies) == 0 {
		return &baton.ProviderResponse{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`)}, nil
	}
	r := f.replies[0]
	f.replies = f.replies[1:]
	return r, nil
}

func (f *fakeEngine) requests() []*baton.ProviderRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*baton.ProviderRequest(nil), f.reqs...)
}

func (f *fakeEngine) SessionTools(context.Context, string, string) ([]baton.ToolDef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tools, nil
}

func (f *fakeEngine) CallSessionTool(_ context.Context, session, actor, name string, input json.RawMessage) (json.RawMessage, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, toolCall{SessionID: session, Actor: actor, Name: name, Input: input})
	if f.callErr != nil {
		return nil, false, f.callErr
	}
	return f.result, f.isErr, nil
}

// epochs is a fixed Epochs.
type epochs map[string]int64

func (e epochs) BrainEpoch(id string) int64 { return e[id] }

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is a gateway on loopback with a fake engine and real tokens.
type fixture struct {
	t      *testing.T
	eng    *fakeEngine
	tokens *auth.TurnTokens
	clk    *clock
	srv    *httptest.Server
	creds  *Credentials
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, eng: newFakeEngine(), clk: &clock{t: time.Now()}}
	var err error
	f.tokens, err = auth.OpenTurnTokens(context.Background(), auth.TurnTokenOptions{
		Store: &settings{}, Turns: f.eng, Now: f.clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{Tokens: f.tokens, Engine: f.eng, Epochs: epochs{"ses_a": 3}, Version: "test"})
	mux := http.NewServeMux()
	g.Routes(mux)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.creds = NewCredentials(CredentialOptions{Issuer: f.tokens, Origin: Origin("", func() string { return f.srv.URL }), Tools: f.eng})
	return f
}

// model issues a model token for an active turn of ses_a.
func (f *fixture) model(turn, actor string) string {
	f.t.Helper()
	f.eng.activate("ses_a", turn, actor)
	tok, _, err := f.tokens.IssueModel(context.Background(), "ses_a", turn, "mch_a")
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}
