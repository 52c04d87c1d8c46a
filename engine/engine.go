package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// Options configure an Engine.
type Options struct {
	Store    baton.Store
	Hub      baton.Hub
	Registry *baton.Registry
	// Providers maps a provider kind (baton.ProviderAnthropic, …) to its
	// implementation.
	Providers map[string]baton.Provider
	// Images reports sandbox image status for session.sandbox.available.
	Images baton.ImageProvisioner
	// Sandboxes runs remote sandboxes; nil means none can be started.
	Sandboxes baton.SandboxDriver
	// MCP connects the MCP servers profiles name; nil means no MCP tools.
	MCP baton.MCPPool
	// Auth, when set, is told about revoked keys so its caches drop them.
	Auth baton.Authenticator
	// TurnTimeout is how long a paused turn is reserved for its owner
	// (BAE_TURN_TIMEOUT; default 120 s).
	TurnTimeout time.Duration
	// ProviderTimeout bounds one provider call (default 120 s).
	ProviderTimeout time.Duration
	// ProviderRetries is how many times a retryable provider failure is
	// retried before the next provider is tried (default 2; -1 for none).
	ProviderRetries int
	// RetryBase is the first backoff between retries (default 250 ms).
	RetryBase time.Duration
	// LookupEnv resolves ${VAR} in provider tokens (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger

	// Clients persists registered session clients; nil disables them.
	Clients baton.ClientStore
	// MaxClients caps a session's live registered clients
	// (BATON_MAX_CLIENTS_PER_SESSION; default 16).
	MaxClients int
	// ClientCallTimeout bounds one registered-client call
	// (BATON_CLIENT_CALL_TIMEOUT; default 120 s).
	ClientCallTimeout time.Duration
	// ClientSweep is how often expired ttl clients are swept (default 1 s;
	// negative: never, tests call SweepClients).
	ClientSweep time.Duration
	// Clock is the time source of every deadline, timeout and wait of the
	// engine (default baton.RealClock).
	Clock baton.Clock

	// MaxSubagents caps a session's running remote subagents
	// (BAE_MAX_SUBAGENTS_PER_SESSION; 0 means the default 8, negative none).
	MaxSubagents int
	// SubagentTimeout bounds a remote subagent whose harness declares no
	// timeout_secs (BAE_SUBAGENT_TIMEOUT; default 600 s).
	SubagentTimeout time.Duration

	// Executors runs the tools of the executors of a profile's
	// executor_environments (dispatch "executor"); nil means none.
	Executors baton.ExecutorHands
	// ExecutorCallTimeout bounds one executor tool call
	// (BATON_EXECUTOR_CALL_TIMEOUT; default 120 s).
	ExecutorCallTimeout time.Duration
	// Brains runs the turns of profiles whose brain is an executor's
	// agent loop (brain.go); nil means such turns cannot run.
	Brains baton.Brains

	// MaxQueuedTurns caps the messages waiting behind a session's running
	// or paused turn (BATON_MAX_QUEUED_TURNS; default DefaultMaxQueuedTurns).
	// One more sendMessage is refused at once.
	MaxQueuedTurns int
	// MaxSubscribers caps a session's live session.subscribe streams
	// (BATON_MAX_SUBSCRIBERS_PER_SESSION; default DefaultMaxSubscribers).
	MaxSubscribers int

	// Unsubscribed, when set, is told of every session.unsubscribe after
	// this node's feeds of the session ended: in a cluster it tells the
	// other nodes, whose feeds end by EndFeeds.
	Unsubscribed func(ctx context.Context, sessionID string) error
	// Ended, when set, is told when a session's runtime is dropped (it
	// closed, or a close found it in state error) after this node's feeds
	// of it ended: in a cluster it tells the other nodes to end theirs.
	Ended func(ctx context.Context, sessionID string) error
}

// Defaults of the per-session caps of Options.
const (
	DefaultMaxQueuedTurns = 32
	DefaultMaxSubscribers = 4096
)

// Engine implements baton.SessionService and baton.TurnService.
type Engine struct {
	store           baton.Store
	hub             baton.Hub
	registry        *baton.Registry
	providers       map[string]baton.Provider
	images          baton.ImageProvisioner
	sandboxes       baton.SandboxDriver
	mcp             baton.MCPPool
	auth            baton.Authenticator
	turnTimeout     time.Duration
	providerTimeout time.Duration
	retries         int
	retryBase       time.Duration
	lookupEnv       func(string) (string, bool)
	log             *slog.Logger
	clk             baton.Clock
	now             func() time.Time // clk.Now

	clients     baton.ClientStore
	maxClients  int
	callTimeout time.Duration
	cmu         sync.Mutex
	regs        map[string]*regClient // registered client id → runtime
	sweepDone   chan struct{}

	ctx        context.Context // writes of running turns; lives until Close is done
	turnCtx    context.Context // parent of every turn; cancelled first at Close
	stopTurns  context.CancelFunc
	stopWrites context.CancelFunc
	wg         sync.WaitGroup // running turns

	mu     sync.Mutex
	actors map[string]*actor

	ccMu sync.Mutex
	cc   map[string]*clientList // session → cached live registered clients

	subs *subagents // remote subagents of every session

	executors       baton.ExecutorHands
	executorTimeout time.Duration

	brains brains // brain sessions (brain.go)

	feeds feeds // live session.subscribe feeds (rpc.go)

	maxQueued int // queued turns per session

	unsubscribed func(ctx context.Context, sessionID string) error
	notifyEnded  func(ctx context.Context, sessionID string) error

	stopping     chan struct{} // closed by EndStreams
	stoppingOnce sync.Once
}

var (
	_ baton.SessionService = (*Engine)(nil)
	_ baton.TurnService    = (*Engine)(nil)
	_ baton.SandboxService = (*Engine)(nil)
)

// New returns an Engine.
func New(opts Options) *Engine {
	e := &Engine{
		store: opts.Store, hub: opts.Hub, registry: opts.Registry, providers: opts.Providers,
		images: opts.Images, sandboxes: opts.Sandboxes, mcp: opts.MCP, auth: opts.Auth,
		turnTimeout: opts.TurnTimeout, providerTimeout: opts.ProviderTimeout,
		retries: opts.ProviderRetries, retryBase: opts.RetryBase,
		lookupEnv: opts.LookupEnv, log: opts.Logger, clk: opts.Clock,
		actors:  make(map[string]*actor),
		cc:      make(map[string]*clientList),
		clients: opts.Clients, maxClients: opts.MaxClients, callTimeout: opts.ClientCallTimeout,
		regs: make(map[string]*regClient),
		subs: newSubagents(opts.MaxSubagents, opts.SubagentTimeout),

		executors: opts.Executors, executorTimeout: opts.ExecutorCallTimeout,
		maxQueued: opts.MaxQueuedTurns, unsubscribed: opts.Unsubscribed, notifyEnded: opts.Ended,
		stopping: make(chan struct{}),
	}
	if e.maxQueued <= 0 {
		e.maxQueued = DefaultMaxQueuedTurns
	}
	e.feeds.max = opts.MaxSubscribers
	if e.feeds.max <= 0 {
		e.feeds.max = DefaultMaxSubscribers
	}
	if e.executorTimeout <= 0 {
		e.executorTimeout = baton.DefaultExecutorCallTimeout
	}
	e.brains.init(opts.Brains, e)
	if e.clk == nil {
		e.clk = baton.RealClock{}
	}
	e.now = e.clk.Now
	if e.maxClients <= 0 {
		e.maxClients = baton.DefaultMaxClients
	}
	if e.callTimeout <= 0 {
		e.callTimeout = baton.DefaultClientCallTimeout
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if e.registry == nil {
		e.registry = &baton.Registry{}
	}
	if e.turnTimeout <= 0 {
		e.turnTimeout = 120 * time.Second
	}
	if e.providerTimeout <= 0 {
		e.providerTimeout = 120 * time.Second
	}
	switch {
	case e.retries < 0:
		e.retries = 0
	case e.retries == 0:
		e.retries = 2
	}
	if e.retryBase <= 0 {
		e.retryBase = 250 * time.Millisecond
	}
	if e.lookupEnv == nil {
		e.lookupEnv = os.LookupEnv
	}
	e.ctx, e.stopWrites = context.WithCancel(context.Background())
	e.turnCtx, e.stopTurns = context.WithCancel(context.Background())
	if every := opts.ClientSweep; e.clients != nil && every >= 0 {
		if every == 0 {
			every = time.Second
		}
		e.sweepDone = make(chan struct{})
		go func() {
			defer close(e.sweepDone)
			e.sweep(e.turnCtx, every)
		}()
	}
	return e
}

// EndStreams ends the registered clients' calls streams at the start of
// a shutdown, so that they do not hold the client port's drain: their
// clients connect again, to another node of a cluster or to this server
// once it is back. Calls in flight keep their results' routes.
func (e *Engine) EndStreams() {
	e.stoppingOnce.Do(func() { close(e.stopping) })
}

// Close cancels running turns, waits for them to record how they ended,
// and drops all runtime state.
func (e *Engine) Close() error {
	e.stopTurns()
	if e.sweepDone != nil {
		<-e.sweepDone
	}
	e.mu.Lock()
	actors := e.actors
	e.actors = make(map[string]*actor)
	e.mu.Unlock()
	for _, a := range actors {
		a.close()
	}
	e.brains.close()
	e.wg.Wait()
	e.subs.close() // after the turns: nothing launches any more
	e.stopWrites()
	return nil
}

// Participants returns the sorted key ids of the session's registered
// drivers. Registrations live in memory: a restart or a close clears them.
func (e *Engine) Participants(_ context.Context, sessionID string) ([]string, error) {
	e.mu.Lock()
	a := e.actors[sessionID]
	e.mu.Unlock()
	if a == nil {
		return []string{}, nil
	}
	return a.driverIDs(), nil
}

// forget drops a session's runtime state — drivers, gate, parked turn,
// queued turns, live streams — after it closed, and stops its remote
// sandbox (events attributed to actor). It is idempotent.
func (e *Engine) forget(ctx context.Context, sessionID, actor string) {
	e.mu.Lock()
	a := e.actors[sessionID]
	delete(e.actors, sessionID)
	e.mu.Unlock()
	if a != nil {
		a.mu.Lock()
		sb := a.sandbox
		a.sandbox = nil
		a.mu.Unlock()
		a.close()
		e.endSubagents(ctx, sessionID, actor) // before the sandbox stops (BAE's client API)
		if sb != nil && sb.id != "" {
			if err := e.stopSandbox(ctx, sessionID, actor, sb, "session_close"); err != nil {
				e.log.Warn("stop sandbox at close", "session_id", sessionID, "err", err)
			}
		}
	}
	e.endClients(ctx, sessionID, actor)
	e.ccMu.Lock()
	delete(e.cc, sessionID)
	e.ccMu.Unlock()
	if e.mcp != nil {
		e.mcp.CloseSession(sessionID)
	}
	if e.hub != nil {
		e.hub.End(sessionID, "")
	}
	if e.notifyEnded != nil {
		if err := e.notifyEnded(ctx, sessionID); err != nil {
			e.log.Warn("tell the other nodes a session ended", "session_id", sessionID, "err", err)
		}
	}
	if e.executors != nil {
		e.executors.Release(sessionID) // session.stop to its executors, in the background
	}
	e.brains.forget(sessionID) // session.close to its agent executor
}

// sessionRow returns the session, from its actor's cache while the session
// is open and nothing has changed it. Every change to a session row goes
// through the engine (join, tool updates, ending it), which drops the
// cached row.
func (e *Engine) sessionRow(ctx context.Context, id string) (*baton.Session, error) {
	e.mu.Lock()
	a := e.actors[id]
	e.mu.Unlock()
	var gen uint64
	if a != nil {
		a.mu.Lock()
		row, g := a.row, a.rowGen
		a.mu.Unlock()
		if row != nil {
			return row, nil
		}
		gen = g
	}
	s, err := e.store.Session(ctx, id)
	if err == nil && a != nil && s.State == baton.StateOpen {
		a.mu.Lock()
		if !a.closed && a.rowGen == gen {
			a.row = s
		}
		a.mu.Unlock()
	}
	return s, err
}

// dropRow forgets a session's cached row after a change to it.
func (e *Engine) dropRow(id string) {
	e.mu.Lock()
	a := e.actors[id]
	e.mu.Unlock()
	if a != nil {
		a.mu.Lock()
		a.row = nil
		a.rowGen++
		a.mu.Unlock()
	}
}
