package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
	"github.com/baton-engine/baton/internal/httpx"
)

// Defaults of Options.
const (
	DefaultHeartbeatInterval = 10 * time.Second // BATON_EXECUTOR_HEARTBEAT_INTERVAL
	DefaultResumeWindow      = 60 * time.Second // BATON_EXECUTOR_RESUME_WINDOW
	DefaultCallTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
)

// Errors of the hub. They are baton errors with code unavailable (or
// conflict), so a transport maps them without help; calls wrap them with
// detail, so test them with errors.Is.
var (
	ErrClosed       = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor hub is closed"}
	ErrDraining     = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor hub is draining: no new sessions"}
	ErrNoExecutor   = &baton.Error{Code: baton.ECodeUnavailable, Message: "no connected executor can take the session"}
	ErrOverCapacity = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor is over capacity"}
	ErrResumeWindow = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor did not reconnect within the resume window"}
	ErrSessionLost  = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor reconnected without the session"}
	// ErrExecutorClosed ends the bindings of an executor that sent
	// executor.close: it stopped for good and will not resume them.
	ErrExecutorClosed = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor closed (executor.close); it will not come back"}
	ErrSessionEnded   = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor ended the session"}
	ErrToolTimeout    = &baton.Error{Code: baton.ECodeUnavailable, Message: "tool call timed out"}
	ErrBound          = &baton.Error{Code: baton.ECodeConflict, Message: "session is already bound to an executor"}
	ErrDuplicate      = &baton.Error{Code: baton.ECodeConflict, Message: "tool call id already used on this session"}
)

// Options configures a Hub. Tokens is required.
type Options struct {
	Tokens baton.ExecutorTokens
	Logger *slog.Logger // nil discards
	// HeartbeatInterval is told to executors; two missed heartbeats
	// expire a lease (close 4008). Default 10s.
	HeartbeatInterval time.Duration
	// ResumeWindow is how long a detached session waits for its executor
	// to come back. Default 60s.
	ResumeWindow time.Duration
	// CallTimeout bounds the wait for an executor's answer to one request
	// (an acknowledgement, not a tool's outcome). Default 30s.
	CallTimeout time.Duration
	// WriteTimeout bounds one message write. Default 10s.
	WriteTimeout time.Duration
	// Clock is the Hub's time source: leases, token deadlines, the resume
	// window and tool call timeouts all run on its timers. Default
	// baton.RealClock; tests replace it.
	Clock baton.Clock
	// Restartable makes Close a restart rather than a retirement: it
	// drains and closes every connection with 1001 but sends no
	// executor.close, on which executors stop for good (bma.executor.v1.1), so
	// they reconnect — to this server once it is back, or to another
	// node — and resume.
	Restartable bool
	// Credentials issues brain turns' model and tools tokens again for
	// model_token.refresh and tools_token.refresh (token.go); nil answers
	// them with -32012 *_token_unavailable.
	Credentials baton.TurnCredentials
	// Files mints the views fs.mount sends to machine executors that
	// declared capabilities.fs.fuse (mount.go); nil sends none.
	Files FileViews
	// FileRenew is how often mounted views are sent again with fresh
	// tokens; keep it below the view token lifetime. Default
	// DefaultFileRenew.
	FileRenew time.Duration
}

// Hub is the harness side of the executor protocol: it serves
// GET /v1/executors/connect, keeps the registry of live executors with
// their leases and token deadlines, and binds sessions to executors.
type Hub struct {
	tokens       baton.ExecutorTokens
	log          *slog.Logger
	interval     time.Duration
	window       time.Duration
	callTimeout  time.Duration
	writeTimeout time.Duration
	clock        baton.Clock
	restartable  bool
	creds        baton.TurnCredentials // token refreshes (token.go)
	methods      map[string]method

	mu       sync.Mutex
	closed   bool
	draining bool
	conns    map[*conn]struct{}
	execs    map[string]*execRec // by executor id
	bindings map[string]*Binding // by session id
	epoch    int64               // last epoch handed out; epochs are hub-wide
	ag       agents              // the brain side (agent.go)
	fs       mounts              // mounted session files (mount.go)
	wg       sync.WaitGroup      // goWork goroutines
}

var _ baton.ExecutorRevoker = (*Hub)(nil)

// Open returns a running hub; Close stops it.
func Open(opts Options) (*Hub, error) {
	if opts.Tokens == nil {
		return nil, errors.New("executor: Options.Tokens is required")
	}
	h := &Hub{
		tokens:       opts.Tokens,
		log:          opts.Logger,
		interval:     opts.HeartbeatInterval,
		window:       opts.ResumeWindow,
		callTimeout:  opts.CallTimeout,
		writeTimeout: opts.WriteTimeout,
		clock:        opts.Clock,
		restartable:  opts.Restartable,
		creds:        opts.Credentials,
		fs:           mounts{views: opts.Files, every: opts.FileRenew},
		conns:        make(map[*conn]struct{}),
		execs:        make(map[string]*execRec),
		bindings:     make(map[string]*Binding),
	}
	if h.log == nil {
		h.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if h.interval <= 0 {
		h.interval = DefaultHeartbeatInterval
	}
	if h.window <= 0 {
		h.window = DefaultResumeWindow
	}
	if h.callTimeout <= 0 {
		h.callTimeout = DefaultCallTimeout
	}
	if h.writeTimeout <= 0 {
		h.writeTimeout = DefaultWriteTimeout
	}
	if h.clock == nil {
		h.clock = baton.RealClock{}
	}
	if h.fs.every <= 0 {
		h.fs.every = DefaultFileRenew
	}
	h.methods = h.table()
	return h, nil
}

// Drain asks every registered executor to drain (executor.drain) and
// waits for their answers (each at most CallTimeout) or ctx. From now on heartbeats answer
// drain:true and Assign refuses new sessions.
func (h *Hub) Drain(ctx context.Context, reason string) error {
	h.mu.Lock()
	h.draining = true
	var peers []*peer.Peer
	for c := range h.conns {
		if c.exec != nil && !c.closing {
			peers = append(peers, c.peer)
		}
	}
	h.mu.Unlock()
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, h.callTimeout)
			defer cancel()
			var res proto.DrainResult
			errs[i] = p.Call(ctx, proto.MethodDrain, proto.Reason{Reason: reason}, &res)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, peer.ErrClosed) {
			return err
		}
	}
	return nil
}

// Close shuts the hub down within ctx: it drains, sends executor.close to
// every connection (unless Options.Restartable) and closes it with 1001,
// then ends every binding
// (pending tool calls fail with ErrClosed). Connections still open when
// ctx ends are cut.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for _, a := range h.ag.sessions {
		a.wakeLocked() // a turn.start waiting for its session's resume gives up
	}
	h.mu.Unlock()

	derr := h.Drain(ctx, "shutdown")
	h.mu.Lock()
	peers := make([]*peer.Peer, 0, len(h.conns))
	for c := range h.conns {
		c.closing = true
		c.stopTimersLocked()
		if c.peer != nil { // else ServeHTTP cuts it when the upgrade ends
			peers = append(peers, c.peer)
		}
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !h.restartable {
				_ = p.Notify(proto.MethodClose, proto.Reason{Reason: "shutdown"})
			}
			p.Close(proto.CloseGoingAway, "server shutting down")
		}()
	}
	var cut bool
	for _, p := range peers {
		select {
		case <-p.Done():
		case <-ctx.Done():
			cut = true
			p.Kill() // also ends a write stuck on a silent executor
			<-p.Done()
		}
	}
	wg.Wait()
	h.mu.Lock()
	for _, b := range h.bindings {
		h.endLocked(b, ErrClosed)
	}
	for _, rec := range h.execs {
		if rec.resume != nil {
			rec.resume.Stop()
		}
	}
	h.execs = map[string]*execRec{}
	h.mu.Unlock()
	h.wg.Wait()
	if cut {
		return ctx.Err()
	}
	if derr != nil && !errors.Is(derr, context.Canceled) && !errors.Is(derr, context.DeadlineExceeded) {
		h.log.Warn("executor: drain before close", slog.Any("error", derr))
	}
	return nil
}

// RevokeCredential closes, with 4001, every connection whose token was
// issued for credentialID.
func (h *Hub) RevokeCredential(credentialID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns {
		if c.grant.CredentialID == credentialID {
			h.shutLocked(c, proto.CloseTokenExpired, "credential revoked")
		}
	}
}

// goWorkLocked runs f on a goroutine that Close waits for, unless the
// hub is closed. Callers hold h.mu.
func (h *Hub) goWorkLocked(f func()) {
	if h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f()
	}()
}

// ServeHTTP serves GET /v1/executors/connect: it checks the executor token
// and the subprotocol before upgrading, then runs the connection until it
// ends. Errors before the upgrade use the /v1 error envelope.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, err := httpx.Bearer(r)
	if err != nil {
		httpx.WriteV1Error(w, r, h.log, err)
		return
	}
	grant, err := h.tokens.Verify(r.Context(), token)
	if err == nil && !grant.ExpiresAt.After(h.clock.Now()) {
		err = baton.Errorf(baton.ECodeUnauthorized, "executor token expired")
	}
	if err != nil {
		httpx.WriteV1Error(w, r, h.log, err)
		return
	}
	sub := negotiate(r.Header.Values("Sec-WebSocket-Protocol"))
	if sub == "" {
		httpx.WriteV1Error(w, r, h.log, baton.Errorf(baton.ECodeBadRequest,
			"no acceptable WebSocket subprotocol: offer %s or %s", proto.SubprotocolV11, proto.SubprotocolV1))
		return
	}
	c := &conn{hub: h, id: baton.NewID("con_"), protocol: sub, grant: grant}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		_ = httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{
			"error": map[string]string{"code": "internal", "message": "server is shutting down"}})
		return
	}
	// Known before the upgrade, so that a revocation or Close racing with
	// it is not missed; Close waits until it is running or gone.
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	ws, nc, err := peer.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:    []string{sub},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil { // Accept has answered
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		return
	}
	p := peer.New(ws, peer.Options{
		Handler:      c.handle,
		Logger:       h.log,
		WriteTimeout: h.writeTimeout,
		NetConn:      nc,
		OnClose:      c.ended,
		Invalid:      c.unregistered,
	})
	h.mu.Lock()
	c.peer = p
	if c.closing { // revoked, or the hub closed, during the upgrade
		code, reason := c.closeCode, c.closeReason
		h.mu.Unlock()
		if code == 0 {
			p.Kill()
		} else {
			p.Close(code, reason)
		}
		p.Start()
		<-p.Done()
		return
	}
	c.startTimersLocked()
	h.mu.Unlock()
	p.Start()
}

// negotiate picks the preferred subprotocol the client offers, or "".
func negotiate(values []string) string {
	offered := map[string]bool{}
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			offered[strings.ToLower(strings.TrimSpace(p))] = true
		}
	}
	for _, p := range proto.Subprotocols() {
		if offered[p] {
			return p
		}
	}
	return ""
}
