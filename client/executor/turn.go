package executor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/baton-engine/baton/executor/proto"
)

// TurnMetadata is turn.start's metadata: where the brain's model calls
// go and with which short-lived credentials.
type TurnMetadata struct {
	ModelBaseURL        string    `json:"model_base_url"`
	ModelToken          string    `json:"model_token"`
	ModelTokenExpiresAt time.Time `json:"model_token_expires_at"`
	ToolsMCPURL         string    `json:"tools_mcp_url,omitempty"`
	ToolsMCPToken       string    `json:"tools_mcp_token,omitempty"`
	CustomTools         []ToolDef `json:"custom_tools,omitempty"`
	Epoch               int64     `json:"epoch"`
	// WorkspacePath is the local directory of the session's workspace
	// view (below FileMounts.Root) when Baton mounts the session's files
	// on this executor (it sends fs.mount right after the first
	// turn.start, so the directory may fill shortly after the turn
	// begins); empty without files.
	WorkspacePath string `json:"workspace_path,omitempty"`
}

// Input is user input added to a running turn with turn.input.
type Input struct {
	ID      string          // input_id
	Content json.RawMessage // content blocks
}

// TurnToken is a refreshed model or tools token.
type TurnToken struct {
	Token     string
	ExpiresAt time.Time
}

// Turn is one agent turn being run by Agent.Run.
type Turn struct {
	SessionID string
	ID        string          // turn_id
	Input     json.RawMessage // the turn's input blocks
	Metadata  TurnMetadata

	e        *Executor
	s        *agentSession
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	canceled bool // under e.mu

	in       sync.Mutex
	inputs   []Input
	inputIDs map[string]bool
	ready    chan struct{} // 1-buffered signal of new input
}

func (t *Turn) wasCanceledLocked() bool { return t.canceled }

func (t *Turn) wasCanceled() bool {
	t.e.mu.Lock()
	defer t.e.mu.Unlock()
	return t.canceled
}

// deliver queues input, once per input_id.
func (t *Turn) deliver(in Input) {
	t.in.Lock()
	if t.inputIDs[in.ID] {
		t.in.Unlock()
		return
	}
	t.inputIDs[in.ID] = true
	t.inputs = append(t.inputs, in)
	t.in.Unlock()
	select {
	case t.ready <- struct{}{}:
	default:
	}
}

// Inputs takes the inputs that arrived since the last call, in order.
func (t *Turn) Inputs() []Input {
	t.in.Lock()
	defer t.in.Unlock()
	out := t.inputs
	t.inputs = nil
	return out
}

// InputReady receives a value when new input may be waiting in Inputs.
func (t *Turn) InputReady() <-chan struct{} { return t.ready }

// Emit holds a durable event of this turn for the harness: it gets the
// session's next sequence number and is re-sent after a reconnect until
// acknowledged. It returns the event_id (ev.ID, or a generated one).
func (t *Turn) Emit(ev AgentEvent) (string, error) {
	if ev.Type == "" {
		return "", errors.New("executor: event without a type")
	}
	body, err := ev.MarshalJSON()
	if err != nil {
		return "", err
	}
	if ev.ID == "" {
		ev.ID = newID("evt_")
	}
	e, s := t.e, t.s
	s.emit.Lock()
	defer s.emit.Unlock()
	if e.stopped() {
		return "", ErrClosed
	}
	s.seq++
	seq := s.seq
	e.mu.Lock()
	epoch := s.epoch
	e.mu.Unlock()
	p := proto.SessionEventParams{SessionID: s.id, Epoch: epoch, TurnID: t.ID, EventID: ev.ID, Sequence: &seq, Event: body}
	reepoch := func(ep int64) any {
		q := p
		q.Epoch = ep
		return q
	}
	err = e.pushStamped(proto.MethodSessionEvent, s.id, p, reepoch, func(raw json.RawMessage, rerr *RPCError) {
		if rerr != nil {
			e.log.Warn("executor: harness refused an event", "session", s.id, "sequence", seq, "err", rerr)
			return
		}
		acked := seq
		var res proto.SessionEventResult
		if json.Unmarshal(raw, &res) == nil && res.AckedSequence != nil && *res.AckedSequence > acked {
			acked = *res.AckedSequence
		}
		e.mu.Lock()
		s.acked = max(s.acked, acked)
		e.mu.Unlock()
	})
	if err != nil {
		s.seq--
		return "", err
	}
	return ev.ID, nil
}

// Delta streams a preview of the durable event eventID with a
// session.event_delta notification. Deltas are lossy: while
// disconnected it returns ErrDisconnected and nothing is sent.
func (t *Turn) Delta(eventID string, delta any) error {
	b, err := json.Marshal(delta)
	if err != nil {
		return err
	}
	return t.e.notifyLive(proto.MethodEventDelta, proto.EventDeltaParams{SessionID: t.SessionID, TurnID: t.ID, EventID: eventID, Delta: b})
}

// RefreshModelToken asks for a fresh model token (model_token.refresh).
// The harness signs one only while the turn is active: otherwise an
// *RPCError with CodeTurnInactive.
func (t *Turn) RefreshModelToken(ctx context.Context) (TurnToken, error) {
	var res proto.ModelTokenRefreshResult
	err := t.e.call(ctx, proto.MethodModelTokenRefresh, proto.ModelTokenRefreshParams{SessionID: t.SessionID, TurnID: t.ID}, &res)
	return TurnToken{Token: res.ModelToken, ExpiresAt: res.ExpiresAt}, err
}

// Epoch is the session's current binding epoch: Metadata.Epoch until a
// reconnect resumes the session in a new one (the harness tells it when
// the executor registers again). Tools tokens are bound to an epoch:
// once it changed, the harness refuses the turn's tools_mcp_token and
// RefreshToolsToken gets one for the new epoch.
func (t *Turn) Epoch() int64 {
	t.e.mu.Lock()
	defer t.e.mu.Unlock()
	return t.s.epoch
}

// RefreshToolsToken asks for a fresh platform tools token
// (tools_token.refresh) for the session's current epoch (Epoch). A call
// refused as turn_inactive because a reconnect moved the session to a
// new epoch meanwhile is sent again with it.
func (t *Turn) RefreshToolsToken(ctx context.Context) (TurnToken, error) {
	var res proto.ToolsTokenRefreshResult
	for {
		epoch := t.Epoch()
		err := t.e.call(ctx, proto.MethodToolsTokenRefresh, proto.ToolsTokenRefreshParams{SessionID: t.SessionID, TurnID: t.ID, Epoch: epoch}, &res)
		var rerr *RPCError
		if errors.As(err, &rerr) && rerr.Code == CodeTurnInactive && t.Epoch() != epoch {
			continue
		}
		return TurnToken{Token: res.ToolsMCPToken, ExpiresAt: res.ExpiresAt}, err
	}
}
