package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/adminapi"
	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/cluster"
	"github.com/baton-engine/baton/config"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/gateway"
	"github.com/baton-engine/baton/httpapi"
	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/internal/supervisor"
	"github.com/baton-engine/baton/mcp"
	"github.com/baton-engine/baton/provider/anthropic"
	"github.com/baton-engine/baton/provider/openai"
	"github.com/baton-engine/baton/provider/scripted"
	"github.com/baton-engine/baton/sandbox"
	"github.com/baton-engine/baton/store"
)

func (c *cli) serveCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server (the default command)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.serve(cmd.Context(), &f, nil)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// lookupEnv adapts the injected getenv to the lookup shape config wants.
func (c *cli) lookupEnv(name string) (string, bool) {
	v := c.getenv(name)
	return v, v != ""
}

// serve runs the server until ctx ends. dev, when set, adjusts the
// configuration for `baton dev` and seeds a profile and key.
func (c *cli) serve(ctx context.Context, f *serveFlags, dev *devOptions) error {
	cfg, err := loadServeConfig(c.getenv, f)
	if dev != nil {
		dev.adjust(cfg, f)
	}
	if err != nil {
		return usageErr(fmt.Errorf("configuration error: %w", err))
	}
	file, err := config.Load(cfg.ConfigPath, c.lookupEnv)
	if err != nil {
		return usageErr(fmt.Errorf("configuration error: %w", err))
	}
	if dev != nil { // into the file, so the config snapshot shows them too
		file.Providers = dev.addProviders(file.Providers, c.lookupEnv)
	}
	registry := file.Registry()
	var secrets []string // files beyond the store's and the admin key
	if dev != nil {
		secrets = append(secrets, dev.clientKeyFile())
	}
	if cfg.Check {
		printExposures(c.stderr, exposures(cfg, secrets...)) // warnings: the configuration is still ok
		fmt.Fprintf(c.stdout, "configuration ok: %d provider(s), %d MCP server(s)\n", len(registry.Providers), len(registry.MCPServers))
		return nil
	}
	log := newLogger(c.stderr, cfg)
	tuneGC(c.getenv)

	feed := hub.New(hub.DefaultBuffer)
	var nodeID string // cluster mode: every PostgreSQL store (docs/cluster.md)
	if cfg.DatabaseURL != "" {
		nodeID = cfg.Cluster.nodeID()
	}
	db, err := store.Open(ctx, store.Options{URL: cfg.storeURL(), Logger: log, OnCommit: publish(feed),
		NodeID: nodeID, LeaseTTL: cfg.Cluster.LeaseTTL})
	if err != nil {
		return runtimeErr(fmt.Errorf("open store: %w", err))
	}
	defer db.Close()

	if err := auth.Bootstrap(ctx, db, auth.BootstrapOptions{
		KeyFile: cfg.AdminKeyFile, HashFile: cfg.AdminKeyHashFile,
		Rotate: cfg.RotateAdminKey, Disabled: cfg.DisableAdminAuth, Logger: log,
	}); err != nil {
		if errors.Is(err, auth.ErrBadHashFile) {
			return usageErr(fmt.Errorf("configuration error: %w", err))
		}
		return runtimeErr(fmt.Errorf("admin key bootstrap: %w", err))
	}
	// After Open and Bootstrap: the WAL and shared-memory files exist, and
	// a rotated admin key file is already the new, private one.
	warnExposures(log, exposures(cfg, secrets...))

	images, runner := imageDriver(cfg, log)
	if runner != nil {
		// Crash recovery: no sandbox of an earlier run is left behind. An
		// unreachable engine only fails the sandboxes that need it.
		cleanupSandboxes(ctx, runner, log, "start")
		defer cleanupSandboxes(context.WithoutCancel(ctx), runner, log, "shutdown")
	}
	// executor:<machine_id> images run on executor shells, the rest on runner.
	router := &sandboxRouter{base: runner, images: images, machines: db}
	prov := sandbox.NewProvisioner(router, log)
	defer prov.Close()
	if err := provisionAll(ctx, db, prov); err != nil {
		return runtimeErr(err)
	}

	authn := auth.New(auth.Options{Keys: db, Logger: log})
	if err := authn.Open(ctx); err != nil {
		return runtimeErr(err)
	}
	defer authn.Close()
	// executorTokens exchanges executor credentials for tokens and verifies
	// them (the executor hub verifies connections with it); revoke is told
	// of every credential the admin API revokes.
	executorTokens, err := auth.OpenExecutorTokens(ctx, auth.ExecutorOptions{Store: db, TTL: cfg.Executor.TokenTTL, Logger: log})
	if err != nil {
		return runtimeErr(err)
	}
	viewTokens, err := auth.OpenViewTokens(ctx, auth.ViewTokenOptions{Store: db, TTL: cfg.Files.ViewTokenTTL}) // fs.mount views
	if err != nil {
		return runtimeErr(err)
	}
	brain, err := openBrainAccess(ctx, db, cfg.PublicURL) // model gateway and session tools of executor brains
	if err != nil {
		return usageErr(fmt.Errorf("configuration error: %w", err))
	}
	minter := viewMinter{tokens: viewTokens, origin: gateway.Origin(brain.public, brain.listenerURL)}
	execs, err := openExecutorSide(cfg.Executor, executorTokens, brain.creds, minter, cfg.Files.ViewTokenTTL/2, db, log)
	if err != nil {
		return runtimeErr(err)
	}
	defer execs.close(context.WithoutCancel(ctx), cfg.ShutdownTimeout, log)
	router.shell = execs.shell
	revoke := revokers{executorTokens, execs.hub}

	claude, gpt := anthropic.New(nil), openai.New(nil)
	defer claude.Close()
	defer gpt.Close()
	pool, err := mcp.Open(mcp.Options{CallTimeout: cfg.MCPCallTimeout, LookupEnv: c.lookupEnv, Version: baton.Version, Logger: log,
		Wrap: supervisor.WrapForward}) // a stdio server's process tree dies with the server

	if err != nil {
		return runtimeErr(err)
	}
	defer pool.Close() // after the engine's Close: stops every session's stdio servers
	opts := engine.Options{
		Store: db, Hub: feed, Registry: registry, Images: prov, Auth: authn, Logger: log,
		Providers: map[string]baton.Provider{
			baton.ProviderAnthropic: claude,
			baton.ProviderOpenAI:    gpt,
			baton.ProviderScripted:  scripted.New(),
		},
		TurnTimeout:     nonZero(cfg.TurnTimeout), // BAE_TURN_TIMEOUT=0: reclaimable at once
		ProviderTimeout: cfg.ProviderTimeout,
		ProviderRetries: cfg.ProviderRetries,
		LookupEnv:       c.lookupEnv,

		Clients:           db,
		MaxClients:        cfg.MaxClients,
		ClientCallTimeout: cfg.ClientCallTimeout,
		MCP:               pool,
		MaxQueuedTurns:    cfg.MaxQueuedTurns,
		MaxSubscribers:    cfg.MaxSubscribers,

		MaxSubagents:    cfg.MaxSubagents,
		SubagentTimeout: nonZero(cfg.SubagentTimeout), // BAE_SUBAGENT_TIMEOUT=0: times out at once
	}
	if cfg.MaxSubagents == 0 {
		opts.MaxSubagents = -1 // BAE_MAX_SUBAGENTS_PER_SESSION=0 allows none; the engine reads 0 as "default"
	}
	opts.Sandboxes = router
	opts.Executors, opts.ExecutorCallTimeout = execs.hands, cfg.Executor.CallTimeout
	var hands *cluster.Hands // cluster mode: the tools of the executors connected to any node
	if nodeID != "" {
		if hands, err = openClusterHands(ctx, db, nodeID, cfg.Cluster.LeaseTTL, execs.hands, log); err != nil {
			return runtimeErr(err)
		}
		defer hands.Close() // after the engine's Close, before the executor side's
		opts.Executors = hands
	}
	opts.Brains = execs.hub // profiles whose brain is an executor's agent loop
	if nodeID != "" {
		opts.Unsubscribed = db.NotifyUnsubscribe // every node's feeds end
		opts.Ended = db.NotifyEnded
	}
	eng := engine.New(opts)
	var node *cluster.Node
	if nodeID != "" {
		node = cluster.New(cluster.Options{Store: db, Engine: eng, ID: nodeID, Version: baton.Version,
			LeaseTTL: cfg.Cluster.LeaseTTL, Logger: log, OnTick: hands.Refresh})
		defer node.Close() // after the engine's Close: hands the sessions over once nothing appends
	}
	defer eng.Close()
	if node != nil { // other nodes' commits wake this node's subscriptions
		listener, err := store.NewListener(db, store.ListenerOptions{
			OnNotice: ringFeeds(feed, eng, func(id string) { authn.Forget(id); db.ForgetCached(id) }), Logger: log})
		if err != nil {
			return runtimeErr(err)
		}
		if err := listener.Open(ctx); err != nil {
			return runtimeErr(fmt.Errorf("listen for other nodes' commits: %w", err))
		}
		defer listener.Close()
	}

	if dev != nil {
		if err := dev.seed(ctx, db, registry); err != nil {
			return runtimeErr(fmt.Errorf("dev setup: %w", err))
		}
	}

	var client *httpapi.Server
	brain.attach(eng, func() string { return client.URL() })
	clientOpts := httpapi.Options{
		Addr: cfg.Addr, Logger: log, MaxBodyBytes: cfg.MaxBodyBytes, MaxInflightBytes: cfg.MaxInflightBytes,
		Auth: authn, Sessions: eng, Events: db, Turns: eng, Sandboxes: eng,
		Clients: eng, V1Store: db, ExecutorTokens: executorTokens, Executors: execs.hub, Mount: brain.routes(execs.hub, log),
		Receipts: db, RateLimit: cfg.Limits.RateLimit, RateBurst: cfg.Limits.RateBurst,
		MinClientVersion: cfg.Limits.MinClientVersion,
		Files:            db, ViewTokens: viewTokens, FileLimits: cfg.Files.Limits, Epochs: execs.hub,
	}
	var ( // nil: a single node
		nodes  baton.NodeRegistry
		leases baton.LeaseStore
	)
	if node != nil {
		clientOpts.Route = clusterRoute(node, hands)
		nodes, leases = db, db
	}
	client = httpapi.New(clientOpts)
	var adminAuth baton.Authenticator = authn
	if cfg.DisableAdminAuth {
		adminAuth = nil
	}
	admin := adminapi.New(adminapi.Options{
		Addr: cfg.AdminAddr, Logger: log, MaxBodyBytes: cfg.MaxBodyBytes,
		Auth: adminAuth, PendingUses: authn.PendingUses, Store: db, Sessions: eng, Images: prov,
		Registry: registry, RedactedConfig: file.Redacted(),
		Executors: db, Revoker: revoke, Nodes: nodes, Leases: leases,
	})
	sweeper := httpapi.NewReceiptSweeper(httpapi.SweeperOptions{
		Receipts: db, Interval: cfg.Limits.SweepInterval, Retention: cfg.Limits.Retention, Logger: log,
	})
	if err := sweeper.Open(ctx); err != nil {
		return runtimeErr(err)
	}
	defer sweeper.Close()
	if err := client.Open(ctx); err != nil {
		return runtimeErr(fmt.Errorf("client listener: %w", err))
	}
	defer client.Close()
	if err := admin.Open(ctx); err != nil {
		return runtimeErr(fmt.Errorf("admin listener: %w", err))
	}
	defer admin.Close()
	if node != nil {
		advertise, note := cfg.Cluster.advertiseURL(client.URL(), net.InterfaceAddrs)
		if note != "" {
			log.Warn(note)
		}
		node.SetAdvertiseURL(advertise)
		if err := node.Open(ctx); err != nil {
			return runtimeErr(fmt.Errorf("join the cluster: %w", err))
		}
		if err := hands.Refresh(ctx); err != nil { // the other nodes' tools now, not a third of a TTL later
			log.Warn("cluster executor tools refresh", "err", err)
		}
	}
	log.Info("baton listening", "client_url", client.URL(), "admin_url", admin.URL(), "version", baton.Version)
	if err := c.announce(cfg, client.URL(), admin.URL()); err != nil {
		return runtimeErr(err)
	}
	if dev != nil {
		dev.banner(c.stdout, client.URL(), admin.URL())
	}

	summaryDone := make(chan struct{})
	summaryCtx, stopSummary := context.WithCancel(ctx)
	go func() {
		defer close(summaryDone)
		activitySummary(summaryCtx, db, pool.Sessions, log, time.Hour)
	}()

	<-ctx.Done()
	stopSummary()
	<-summaryDone
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if node != nil { // no more takeovers here; the registry shows it draining
		if err := node.Drain(sctx); err != nil {
			log.Warn("mark node draining", "err", err)
		}
	}
	execs.close(sctx, cfg.ShutdownTimeout, log) // drain, then 1001: executors come back after a restart
	// Subscriptions would hold the drain until the timeout: they end now
	// with an error frame that says how to resume (on another node).
	feed.Fail("", errShuttingDown)
	eng.EndStreams() // registered clients' calls streams: they reconnect
	errC := client.Shutdown(sctx)
	errA := admin.Shutdown(sctx)
	if err := errors.Join(errC, errA); err != nil {
		log.Warn("shutdown did not drain in time", "err", err)
	}
	return nil
}

// errShuttingDown ends the live subscriptions at shutdown.
var errShuttingDown = baton.Errorf(baton.ECodeUnavailable, "the server is shutting down; subscribe again with since_event_id set to the last event received")

// publish hands each committed batch of events to the live feed, from the
// store's single writer, so subscribers see every session in order.
func publish(h *hub.Hub) func([]*baton.Event) {
	return func(evs []*baton.Event) {
		notices := make([]baton.Notice, len(evs))
		for i, ev := range evs {
			notices[i] = baton.Notice{Event: ev}
		}
		h.Publish(notices...)
	}
}

// announce tells whoever started the process where it listens: the
// in-process ready hook (tests) and BATON_READY_FILE (supervisors, tests of
// the real binary), written atomically.
func (c *cli) announce(cfg *serveConfig, clientURL, adminURL string) error {
	if c.ready != nil {
		c.ready(clientURL, adminURL)
	}
	if cfg.ReadyFile == "" {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"client_url": clientURL, "admin_url": adminURL, "pid": os.Getpid()})
	tmp := cfg.ReadyFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	return os.Rename(tmp, cfg.ReadyFile)
}

// gcPercent is the garbage collector's target when GOGC is not set: the
// server's live heap is small and allocation-heavy (every event, request
// and stream), so the default of 100 collects often; 200 cut server CPU
// per round trip by ~8% under loadgen for a higher peak heap. GOMEMLIMIT,
// when set, still bounds the heap.
const gcPercent = 200

// tuneGC sets gcPercent unless the operator chose GOGC.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

func newLogger(w io.Writer, cfg *serveConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// sandboxRunner runs remote sandboxes and removes what they leave behind.
type sandboxRunner interface {
	baton.SandboxDriver
	sandbox.Cleaner
}

// imageDriver picks the sandbox driver, which makes images ready and runs
// the sandboxes: the Docker engine, or Linux namespace jails over rootfs
// directories (state in "sandboxes" next to the SQLite file). Docker
// containers are labelled with this server's instance (a digest of its
// store location), and the process driver names its cgroups after its
// state directory, so that cleanup touches only this server's sandboxes.
func imageDriver(cfg *serveConfig, log *slog.Logger) (sandbox.ImageEnsurer, sandboxRunner) {
	if cfg.SandboxDriver == "process" {
		p := sandbox.NewProcess(sandbox.ProcessOptions{
			RootfsDir: cfg.rootfsDir(), StateDir: filepath.Join(filepath.Dir(cfg.DBPath), "sandboxes"), Logger: log,
		})
		return p, p
	}
	d := sandbox.NewDocker(cfg.DockerSocket)
	sum := sha256.Sum256([]byte(cfg.storeURL()))
	d.Instance = hex.EncodeToString(sum[:8])
	return d, d
}

// cleanupSandboxes removes this server's sandboxes, logging the outcome;
// it never fails the caller.
func cleanupSandboxes(ctx context.Context, d sandbox.Cleaner, log *slog.Logger, when string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := d.Cleanup(ctx)
	if err != nil {
		log.Warn("sandbox cleanup", "at", when, "removed", n, "err", err)
		return
	}
	if n > 0 {
		log.Info("sandbox cleanup", "at", when, "removed", n)
	}
}

// rootfsDir is BATON_SANDBOX_ROOTFS_DIR, by default "rootfs" next to the
// SQLite file.
func (c *serveConfig) rootfsDir() string {
	if c.RootfsDir != "" {
		return c.RootfsDir
	}
	return filepath.Join(filepath.Dir(c.DBPath), "rootfs")
}

// provisionAll starts image provisioning for every profile that declares
// images, as at every BAE start.
func provisionAll(ctx context.Context, db baton.ProfileStore, prov baton.ImageProvisioner) error {
	return eachProfile(ctx, db, func(p *baton.Profile) bool {
		if len(p.AvailableSandboxes) > 0 {
			prov.Provision(ctx, p)
		}
		return true
	})
}

// eachProfile calls fn on every active profile, page by page, until fn
// returns false.
func eachProfile(ctx context.Context, db baton.ProfileStore, fn func(*baton.Profile) bool) error {
	page := baton.Page{Limit: 200}
	for {
		items, next, err := db.ListProfiles(ctx, page)
		if err != nil {
			return fmt.Errorf("list profiles: %w", err)
		}
		for _, p := range items {
			if !fn(p) {
				return nil
			}
		}
		if next == "" {
			return nil
		}
		page.Cursor = next
	}
}

// activitySummary logs catalogue counts, and how many sessions have live
// MCP connections, at start and then every interval.
func activitySummary(ctx context.Context, db baton.Store, mcpSessions func() int, log *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if st, err := db.Stats(ctx); err == nil {
			log.Info("activity summary", "profiles", st.Profiles, "client_keys", st.ClientKeys,
				"open_sessions", st.OpenSessions, "sessions", st.Sessions, "events", st.Events,
				"mcp_sessions", mcpSessions())
		} else if ctx.Err() == nil {
			log.Warn("activity summary", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// nonZero keeps an explicit zero duration from reading as "default".
func nonZero(d time.Duration) time.Duration {
	if d == 0 {
		return time.Nanosecond
	}
	return d
}
