package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// fakeTurns is a baton.BrainTurns whose active turns the test sets.
type fakeTurns struct {
	mu     sync.Mutex
	active map[string]bool // session/turn
	err    error
	asked  int
}

func (f *fakeTurns) set(session, turn string, active bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active == nil {
		f.active = map[string]bool{}
	}
	f.active[session+"/"+turn] = active
}

func (f *fakeTurns) TurnActive(_ context.Context, session, turn string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	return f.active[session+"/"+turn], f.err
}

func newTurnTokens(t testing.TB, store baton.SettingStore, turns baton.BrainTurns, clk *clock) *TurnTokens {
	t.Helper()
	x, err := OpenTurnTokens(context.Background(), TurnTokenOptions{Store: store, Turns: turns, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestTurnTokenRoundTrip(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	turns := &fakeTurns{}
	turns.set("ses_a", "turn_1", true)
	store := newFakeExecutors()
	x := newTurnTokens(t, store, turns, clk)

	model, g, err := x.IssueModel(ctx, "ses_a", "turn_1", "mch_a")
	if err != nil {
		t.Fatal(err)
	}
	want := &TurnGrant{SessionID: "ses_a", TurnID: "turn_1", MachineID: "mch_a", ExpiresAt: epoch.Add(time.Hour)}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("issued grant (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(model, ModelTokenPrefix) {
		t.Errorf("model token %q lacks %s", model, ModelTokenPrefix)
	}
	got, err := x.VerifyModel(model)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verified grant (-want +got):\n%s", diff)
	}

	tools, tg, err := x.IssueTools(ctx, "ses_a", "turn_1", "mch_a", 7)
	if err != nil {
		t.Fatal(err)
	}
	want.Epoch = 7
	if diff := cmp.Diff(want, tg); diff != "" {
		t.Errorf("tools grant (-want +got):\n%s", diff)
	}
	if got, err := x.VerifyTools(tools); err != nil || got.Epoch != 7 {
		t.Fatalf("VerifyTools = %+v, %v", got, err)
	}

	// The kinds do not mix, and executor tokens are neither.
	_, err = x.VerifyTools(model)
	wantErr(t, err, baton.ECodeUnauthorized, "invalid tools token")
	_, err = x.VerifyModel(tools)
	wantErr(t, err, baton.ECodeUnauthorized, "invalid model token")
	exec := newTokens(t, store, clk, 0)
	_, secret := store.mint(baton.ExecutorScopeMachine, "mch_a")
	et, _, err := exec.Issue(ctx, secret, baton.ExecutorScopeMachine, "mch_a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.VerifyModel(et)
	wantErr(t, err, baton.ECodeUnauthorized, "invalid model token")
	if _, err := exec.Verify(ctx, model); baton.ErrorCode(err) != baton.ECodeUnauthorized {
		t.Errorf("a model token verified as an executor token: %v", err)
	}

	// Another node of the installation verifies them; another
	// installation does not.
	if _, err := newTurnTokens(t, store, nil, clk).VerifyModel(model); err != nil {
		t.Errorf("same key: %v", err)
	}
	_, err = newTurnTokens(t, newFakeExecutors(), nil, clk).VerifyModel(model)
	wantErr(t, err, baton.ECodeUnauthorized, "invalid model token")
}

func TestTurnTokenExpiry(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	x := newTurnTokens(t, newFakeExecutors(), nil, clk)
	model, _, err := x.IssueModel(ctx, "ses_a", "turn_1", "mch_a")
	if err != nil {
		t.Fatal(err)
	}
	tools, _, err := x.IssueTools(ctx, "ses_a", "turn_1", "mch_a", 1)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour - time.Millisecond)
	if _, err := x.VerifyModel(model); err != nil {
		t.Fatalf("a millisecond before expiry: %v", err)
	}
	clk.Add(time.Millisecond)
	_, err = x.VerifyModel(model)
	wantErr(t, err, baton.ECodeUnauthorized, "model token expired")
	_, err = x.VerifyTools(tools)
	wantErr(t, err, baton.ECodeUnauthorized, "tools token expired")
}

func TestTurnTokenIssueNeedsActiveTurn(t *testing.T) {
	ctx := context.Background()
	turns := &fakeTurns{}
	turns.set("ses_a", "turn_1", true)
	turns.set("ses_a", "turn_0", false)
	x := newTurnTokens(t, newFakeExecutors(), turns, newClock())
	for _, turn := range []string{"turn_0", "turn_unknown"} {
		if _, _, err := x.IssueModel(ctx, "ses_a", turn, "mch_a"); !errors.Is(err, ErrTurnInactive) {
			t.Errorf("IssueModel(%s) = %v, want ErrTurnInactive", turn, err)
		}
		if _, _, err := x.IssueTools(ctx, "ses_a", turn, "mch_a", 1); !errors.Is(err, ErrTurnInactive) {
			t.Errorf("IssueTools(%s) = %v, want ErrTurnInactive", turn, err)
		}
	}
	if baton.ErrorCode(ErrTurnInactive) != baton.ECodeForbidden {
		t.Errorf("ErrTurnInactive has code %s", baton.ErrorCode(ErrTurnInactive))
	}
	if _, _, err := x.IssueModel(ctx, "ses_a", "turn_1", "mch_a"); err != nil {
		t.Errorf("active turn: %v", err)
	}
	// A turn that ends gets no further token.
	turns.set("ses_a", "turn_1", false)
	if _, _, err := x.IssueModel(ctx, "ses_a", "turn_1", "mch_a"); !errors.Is(err, ErrTurnInactive) {
		t.Errorf("ended turn: %v", err)
	}
	turns.err = errors.New("store down")
	if _, _, err := x.IssueModel(ctx, "ses_a", "turn_1", "mch_a"); err == nil || errors.Is(err, ErrTurnInactive) {
		t.Errorf("lookup failure = %v, want a plain error", err)
	}
	if _, _, err := x.IssueTools(ctx, "ses_a", "turn_1", "mch_a", 0); err == nil {
		t.Error("a tools token without an epoch was issued")
	}
	if _, _, err := x.IssueModel(ctx, "", "turn_1", "mch_a"); err == nil {
		t.Error("a model token without a session was issued")
	}
}

func TestTurnTokenTamper(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	x := newTurnTokens(t, newFakeExecutors(), nil, clk)
	token, _, err := x.IssueModel(ctx, "ses_a", "turn_1", "mch_a")
	if err != nil {
		t.Fatal(err)
	}
	head, m64, _ := strings.Cut(token, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(head, ModelTokenPrefix))
	reencode := func(p string) string {
		return ModelTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(p)) + "." + m64
	}
	bad := map[string]string{
		"empty":           "",
		"no dot":          head,
		"session swapped": reencode(strings.Replace(string(payload), "ses_a", "ses_b", 1)),
		"turn swapped":    reencode(strings.Replace(string(payload), "turn_1", "turn_2", 1)),
		"expiry extended": reencode(strings.Replace(string(payload), `"x":`, `"x":9`, 1)),
		"tools prefix":    ToolsTokenPrefix + strings.TrimPrefix(token, ModelTokenPrefix),
		"too long":        token + strings.Repeat("A", maxSignedToken),
	}
	for i := range token {
		b := []byte(token)
		b[i] ^= 0x01
		bad[fmt.Sprintf("flip %d", i)] = string(b)
	}
	for name, tok := range bad {
		if _, err := x.VerifyModel(tok); baton.ErrorCode(err) != baton.ECodeUnauthorized {
			t.Errorf("%s: VerifyModel = %v, want unauthorized", name, err)
		}
	}
	// Well-signed claims of the wrong shape are refused too.
	for name, cl := range map[string]turnClaims{
		"model with epoch": {V: 1, Session: "s", Turn: "t", Epoch: 3, Expires: epoch.Add(time.Hour).UnixMilli()},
		"no turn":          {V: 1, Session: "s", Expires: epoch.Add(time.Hour).UnixMilli()},
		"version 2":        {V: 2, Session: "s", Turn: "t", Expires: epoch.Add(time.Hour).UnixMilli()},
	} {
		tok, err := x.key.seal(ModelTokenPrefix, &cl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x.VerifyModel(tok); baton.ErrorCode(err) != baton.ECodeUnauthorized {
			t.Errorf("%s: VerifyModel = %v, want unauthorized", name, err)
		}
	}
	neg, _ := x.key.seal(ToolsTokenPrefix, &turnClaims{V: 1, Session: "s", Turn: "t", Epoch: -1, Expires: epoch.Add(time.Hour).UnixMilli()})
	if _, err := x.VerifyTools(neg); baton.ErrorCode(err) != baton.ECodeUnauthorized {
		t.Errorf("negative epoch: VerifyTools = %v", err)
	}
}

// FuzzTurnToken feeds both verifiers arbitrary strings: they must never
// panic, must fail with ECodeUnauthorized, and can only accept the
// tokens this service signed, each as its own kind.
func FuzzTurnToken(f *testing.F) {
	ctx := context.Background()
	x := newTurnTokens(f, newFakeExecutors(), nil, newClock())
	model, _, err := x.IssueModel(ctx, "ses_a", "turn_1", "mch_a")
	if err != nil {
		f.Fatal(err)
	}
	tools, _, err := x.IssueTools(ctx, "ses_a", "turn_1", "mch_a", 2)
	if err != nil {
		f.Fatal(err)
	}
	head, m64, _ := strings.Cut(model, ".")
	for _, seed := range []string{
		model, tools, head, head + ".", "." + m64, model + "=", model[:len(model)-1],
		ModelTokenPrefix, ToolsTokenPrefix + "e30." + m64,
		ModelTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"s":"s","t":"t","m":"","x":1e20}`)) + "." + m64,
		"bae_mdt_..", "bae_tlt_\x00.\xff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if h, payload, mac, ok := cutSigned(ModelTokenPrefix, s); ok {
			re := h + "." + base64.RawURLEncoding.EncodeToString(mac)
			if re != s || !strings.HasSuffix(h, base64.RawURLEncoding.EncodeToString(payload)) {
				t.Fatalf("cutSigned(%q) is not canonical: %q", s, re)
			}
		}
		for _, v := range []struct {
			verify func(string) (*TurnGrant, error)
			own    string
		}{{x.VerifyModel, model}, {x.VerifyTools, tools}} {
			g, err := v.verify(s)
			if err == nil {
				if s != v.own || g.SessionID != "ses_a" {
					t.Fatalf("accepted %q as %+v", s, g)
				}
				continue
			}
			if baton.ErrorCode(err) != baton.ECodeUnauthorized {
				t.Fatalf("verify(%q) = %v, want unauthorized", s, err)
			}
		}
	})
}

func BenchmarkTurnTokenVerify(b *testing.B) {
	x := newTurnTokens(b, newFakeExecutors(), nil, newClock())
	token, _, err := x.IssueModel(context.Background(), "ses_a", "turn_1", "mch_a")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.VerifyModel(token); err != nil {
			b.Fatal(err)
		}
	}
}
