package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/baton-engine/baton"
)

// A request is one write waiting for the writer. Its state moves from
// queued to taken (the writer runs it; the caller must wait for the answer)
// or to abandoned (the caller gave up while it was still queued; the writer
// skips it).
type request struct {
	ctx   context.Context
	fn    func(*wtx) error
	state atomic.Int32
	err   error
	done  chan struct{}
}

const (
	queued int32 = iota
	taken
	abandoned
)

// maxCachedSeqs bounds the per-session sequence cache; past it the cache is
// dropped and refilled lazily.
const maxCachedSeqs = 1 << 16

// errRetry makes the writer rerun a batch with a savepoint around every
// request.
var errRetry = errors.New("store: retry batch with savepoints")

// writer is the group-commit writer: one goroutine that owns the write
// connection and commits whatever is queued in one transaction.
type writer struct {
	db     *sql.DB
	max    int
	log    *slog.Logger
	queue  chan *request
	quit   chan struct{}
	exited chan struct{}

	batches atomic.Int64 // transactions attempted, for tests and diagnostics
	retries atomic.Int64 // of which rerun with savepoints

	// lock is appended to a SELECT that reads a row the request then
	// rewrites: FOR UPDATE on PostgreSQL, where other nodes may write the
	// same row; nothing on SQLite, whose writer lock covers the database.
	lock string
	// bulk defers the event inserts of a batch to one array INSERT at
	// commit time (PostgreSQL, where each statement is a round trip).
	bulk bool

	// onCommit receives each committed transaction's events (set before
	// the first request, read only by the writer goroutine).
	onCommit func([]*baton.Event)

	// fence, when set (cluster mode, PostgreSQL), holds the sessions this
	// node owns: every append is checked against its lease (fence.go).
	// notify is then the channel each commit rings (notify.go). Both are
	// set before the first request.
	fence  *fencer
	notify string

	// ckpt, when set (SQLite), copies the WAL into the database file off
	// the writer's path; the writer kicks it every checkpointEvery units
	// of committed work (set before the first request).
	ckpt *checkpointer

	// Owned by the writer goroutine.
	committed []*baton.Event   // events of the last committed attempt
	seqs      map[string]int64 // session id → last committed (or in-batch) seq
	bases     baseCache        // session id → last committed provider request (delta.go)
	ins       stmt             // insert one event
	last      stmt             // session existence and last seq
	sinceCkpt int              // work committed since the last checkpoint kick
}

// stmt is a statement the writer runs often. On SQLite it is prepared once
// on the single write connection; on PostgreSQL pgx caches prepared
// statements itself and ps stays nil.
type stmt struct {
	text string
	ps   *sql.Stmt
}

const (
	insertEventSQL = `INSERT INTO session_events (session_id, seq, id, client_key_id, event_type, payload, created_at,
	base_seq, base_prefix, base_suffix)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	// sqliteInsertEventSQL is insertEventSQL with anonymous parameters,
	// which the SQLite driver binds without looking up (and allocating)
	// a name for each.
	sqliteInsertEventSQL = `INSERT INTO session_events (session_id, seq, id, client_key_id, event_type, payload, created_at,
	base_seq, base_prefix, base_suffix)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	bulkInsertEventSQL = `INSERT INTO session_events (session_id, seq, id, client_key_id, event_type, payload, created_at,
	base_seq, base_prefix, base_suffix)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
	$8::bigint[], $9::bigint[], $10::bigint[])`
	lastSeqSQL = `SELECT (SELECT COUNT(*) FROM sessions WHERE id = $1),
	(SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_id = $1)`
)

func newWriter(ctx context.Context, db *sql.DB, sqlite bool, maxBatch int, log *slog.Logger) (*writer, error) {
	w := &writer{
		db:     db,
		max:    maxBatch,
		log:    log,
		queue:  make(chan *request, maxBatch),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
		seqs:   make(map[string]int64),
		bases:  newBaseCache(defaultBaseBytes),
		ins:    stmt{text: insertEventSQL},
		last:   stmt{text: lastSeqSQL},
	}
	if !sqlite {
		w.lock = " FOR UPDATE"
		w.bulk = true
	} else {
		w.ins.text = sqliteInsertEventSQL
		for _, s := range []*stmt{&w.ins, &w.last} {
			ps, err := db.PrepareContext(ctx, s.text)
			if err != nil {
				w.closeStmts()
				return nil, fmt.Errorf("store: prepare: %w", err)
			}
			s.ps = ps
		}
	}
	go w.loop()
	return w, nil
}

func (w *writer) closeStmts() {
	for _, s := range []*stmt{&w.ins, &w.last} {
		if s.ps != nil {
			_ = s.ps.Close()
		}
	}
}

// stop lets the writer commit everything already queued, then waits for it
// to exit.
func (w *writer) stop() {
	close(w.quit)
	<-w.exited
	w.closeStmts()
}

// do runs fn in the writer's next transaction and returns its error once
// that transaction committed (or fn's own error). A caller whose ctx ends
// while the request is still queued gets ctx.Err() and the request never
// runs; once the writer has taken it, do waits for the outcome.
func (w *writer) do(ctx context.Context, fn func(*wtx) error) error {
	return w.submit(ctx, fn)()
}

// submit queues fn and returns a wait for its outcome. Requests run in
// the order they were queued.
func (w *writer) submit(ctx context.Context, fn func(*wtx) error) (wait func() error) {
	if err := ctx.Err(); err != nil {
		return func() error { return err }
	}
	r := &request{ctx: ctx, fn: fn, done: make(chan struct{})}
	select {
	case w.queue <- r:
	case <-ctx.Done():
		return func() error { return ctx.Err() }
	case <-w.quit:
		return func() error { return ErrClosed }
	}
	return func() error {
		select {
		case <-r.done:
			return r.err
		case <-ctx.Done():
			if r.state.CompareAndSwap(queued, abandoned) {
				return ctx.Err()
			}
		case <-w.exited:
			// Enqueued after the final drain: nobody will run it.
			if r.state.CompareAndSwap(queued, abandoned) {
				return ErrClosed
			}
		}
		<-r.done
		return r.err
	}
}

func (w *writer) loop() {
	defer close(w.exited)
	batch := make([]*request, 0, w.max)
	for {
		select {
		case r := <-w.queue:
			batch = w.fill(append(batch[:0], r))
			w.commit(batch)
		case <-w.quit:
			for {
				batch = w.fill(batch[:0])
				if len(batch) == 0 {
					return
				}
				w.commit(batch)
			}
		}
	}
}

// fill appends queued requests to batch without blocking, up to the cap.
func (w *writer) fill(batch []*request) []*request {
	for len(batch) < w.max {
		select {
		case r := <-w.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// commit runs one batch and answers every request in it.
func (w *writer) commit(batch []*request) {
	live := batch[:0]
	for _, r := range batch {
		if r.ctx.Err() != nil && r.state.CompareAndSwap(queued, abandoned) {
			r.err = r.ctx.Err()
			close(r.done)
			continue
		}
		if r.state.CompareAndSwap(queued, taken) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	start := time.Now()
	w.batches.Add(1)
	err := w.attempt(live, false)
	if errors.Is(err, errRetry) {
		w.retries.Add(1)
		err = w.attempt(live, true)
	}
	if err == nil && w.ckpt != nil {
		// A commit writes a WAL frame or so per event (its session's index
		// leaf, its share of table pages) and a few for the batch.
		w.sinceCkpt += len(w.committed) + 1
		if w.sinceCkpt >= checkpointEvery {
			w.sinceCkpt = 0
			w.ckpt.kick()
		}
	}
	if err == nil && w.onCommit != nil && len(w.committed) > 0 {
		w.onCommit(w.committed)
		clear(w.committed)
	}
	if err != nil {
		w.log.Error("store write batch failed", "requests", len(live), "err", err)
	} else if w.log.Enabled(context.Background(), slog.LevelDebug) {
		w.log.Debug("store write batch committed", "requests", len(live), "duration", time.Since(start))
	}
	for _, r := range live {
		if err != nil {
			r.err = err
		}
		close(r.done)
		r.fn = nil
	}
	clear(batch)
}

// attempt runs the batch in one transaction. Without savepoints, the first
// request that fails after touching the database aborts the attempt with
// errRetry; with savepoints, it is rolled back alone. Requests that fail
// before writing anything (a lookup said no) never need either.
func (w *writer) attempt(live []*request, savepoints bool) error {
	ctx := context.Background() // the shared transaction outlives any one caller
	if len(w.seqs) > maxCachedSeqs {
		clear(w.seqs)
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	b := &txn{w: w, tx: tx, ctx: ctx, deferred: w.bulk && !savepoints}
	var touched []string
	var numbered []*wtx // requests whose events got seqs in this attempt
	undo := func() {
		w.forget(touched)
		for _, t := range numbered {
			t.reset()
		}
	}
	fail := func(err error) error {
		_ = tx.Rollback()
		undo()
		return err
	}
	for _, r := range live {
		r.err = nil
		if savepoints {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT op"); err != nil {
				return fail(fmt.Errorf("store: savepoint: %w", err))
			}
		}
		t := &wtx{txn: b}
		err := r.fn(t)
		if err == nil {
			b.claims = append(b.claims, t.claims...)
		}
		touched = append(touched, t.touched...)
		if len(t.events) > 0 {
			numbered = append(numbered, t)
		}
		if err != nil {
			t.reset()
			w.forget(t.touched)
			if t.dirty && !savepoints {
				return fail(errRetry)
			}
			if t.dirty {
				if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT op"); rerr != nil {
					return fail(fmt.Errorf("store: rollback to savepoint: %w", rerr))
				}
				t.unfence()
			}
			r.err = err
		}
		if savepoints {
			if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT op"); err != nil {
				return fail(fmt.Errorf("store: release savepoint: %w", err))
			}
		}
	}
	if ok, err := b.checkFences(); err != nil || !ok {
		// A lease moved (or the check failed): find out whose appends to
		// refuse, one savepoint and one check per session at a time.
		w.log.Debug("store: a lease moved under the batch; retrying it", "err", err)
		return fail(errRetry)
	}
	if err := b.flush(); err != nil {
		// Some request's events do not fit (a duplicate id, a seq another
		// node took): find out whose, one savepoint at a time.
		w.log.Debug("store: bulk event insert failed; retrying the batch", "err", err)
		return fail(errRetry)
	}
	if w.notify != "" {
		if err := b.ring(numbered); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		undo()
		return fmt.Errorf("store: commit: %w", err)
	}
	for _, id := range b.claims {
		w.fence.own(id, 1, false)
	}
	w.committed = w.committed[:0]
	for _, t := range numbered {
		for _, e := range t.events {
			if e.Seq > 0 { // a request rolled back to its savepoint has Seq reset
				w.committed = append(w.committed, e)
			}
		}
		// Only now may these requests be bases, of later transactions':
		// a base in its own transaction could be rolled back alone.
		for _, r := range t.requests {
			if r.e.Seq > 0 {
				w.bases.put(r.e.SessionID, r.e.Seq, r.depth, r.e.Payload)
			}
		}
	}
	return nil
}

// forget drops cached sequence numbers; they are reloaded from the
// database (inside the current transaction) on next use.
func (w *writer) forget(sessions []string) {
	for _, id := range sessions {
		delete(w.seqs, id)
	}
}

// txn is one attempt's transaction.
type txn struct {
	w     *writer
	tx    *sql.Tx
	ctx   context.Context
	stmts map[*sql.Stmt]*sql.Stmt // prepared statements bound to tx

	// deferred collects the batch's events in pending and inserts them
	// all in flush, just before COMMIT. Requests must therefore not read
	// session_events other than through nextSeq, which the seq cache
	// answers for every session with pending events.
	deferred bool
	pending  []pendingEvent

	// Cluster mode (fence.go): each session's fence in this attempt, the
	// sessions whose lease a deferred attempt checks before COMMIT, and
	// the sessions whose lease committed requests created.
	fences    map[string]fenceState
	unchecked []string
	claims    []string
}

// pendingEvent is a deferred event with its payload column's value.
type pendingEvent struct {
	e    *baton.Event
	text string
	d    delta
}

// flush inserts the pending events with one statement.
func (b *txn) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	n := len(b.pending)
	sessions, ids, types, payloads, created := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seqs, clients := make([]int64, n), make([]*string, n)
	bases, prefixes, suffixes, lens := make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]int64, 0, 2*n)
	for i, p := range b.pending {
		e := p.e
		sessions[i], seqs[i], ids[i], types[i] = e.SessionID, e.Seq, e.ID, e.Type
		payloads[i], created[i] = p.text, formatTime(e.CreatedAt)
		if e.ClientKeyID != "" {
			clients[i] = &e.ClientKeyID
		}
		if p.d.base != 0 {
			bases[i] = &b.pending[i].d.base
			lens = append(lens, int64(p.d.prefix), int64(p.d.suffix))
			prefixes[i], suffixes[i] = &lens[len(lens)-2], &lens[len(lens)-1]
		}
	}
	b.pending = nil
	if _, err := b.tx.ExecContext(b.ctx, bulkInsertEventSQL, sessions, seqs, ids, clients, types, payloads, created,
		bases, prefixes, suffixes); err != nil {
		return fmt.Errorf("store: insert events: %w", err)
	}
	return nil
}

// wtx is the view one request has of the batch transaction. It records
// whether the request touched the database (dirty), which sessions' cached
// sequence numbers it advanced, and which events it numbered.
type wtx struct {
	*txn
	dirty    bool
	touched  []string
	events   []*baton.Event
	requests []providerRequest // among events: bases once committed
	fenced   []string          // sessions whose fence this request set
	claims   []string          // sessions whose lease this request created
}

// providerRequest is a provider request the writer inserted, and the
// depth of its delta chain (0: stored whole).
type providerRequest struct {
	e     *baton.Event
	depth int
}

func (t *wtx) bound(s stmt) *sql.Stmt {
	if s.ps == nil {
		return nil
	}
	if t.stmts == nil {
		t.stmts = make(map[*sql.Stmt]*sql.Stmt)
	}
	ts, ok := t.stmts[s.ps]
	if !ok {
		ts = t.tx.StmtContext(t.ctx, s.ps)
		t.stmts[s.ps] = ts
	}
	return ts
}

// exec runs a write statement.
func (t *wtx) exec(query string, args ...any) (sql.Result, error) {
	t.dirty = true
	return t.tx.ExecContext(t.ctx, query, args...)
}

// execAffected runs a write statement and returns the affected row count.
func (t *wtx) execAffected(query string, args ...any) (int64, error) {
	res, err := t.exec(query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.dirty = true
	}
	return n, err
}

// get runs a single-row query; a missing row is sql.ErrNoRows and leaves
// the request clean.
func (t *wtx) get(query string, args []any, dest ...any) error {
	return t.scanRow(t.tx.QueryRowContext(t.ctx, query, args...), dest)
}

func (t *wtx) scanRow(row *sql.Row, dest []any) error {
	err := row.Scan(dest...)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.dirty = true // a failed statement may have aborted the transaction
	}
	return err
}

// column runs a query returning one text column.
func (t *wtx) column(query string, args ...any) ([]string, error) {
	out, err := queryColumn(t.ctx, t.tx, query, args...)
	if err != nil {
		t.dirty = true
	}
	return out, err
}

// queryColumn runs a query returning one text column, in a transaction
// or on a pool.
func queryColumn(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// nextSeq returns the sequence number the next event of sessionID gets.
func (t *wtx) nextSeq(sessionID string) (int64, error) {
	if n, ok := t.w.seqs[sessionID]; ok {
		return n + 1, nil
	}
	var exists, last int64
	var row *sql.Row
	if ps := t.bound(t.w.last); ps != nil {
		row = ps.QueryRowContext(t.ctx, sessionID)
	} else {
		row = t.tx.QueryRowContext(t.ctx, t.w.last.text, sessionID)
	}
	if err := t.scanRow(row, []any{&exists, &last}); err != nil {
		return 0, fmt.Errorf("store: load last seq: %w", err)
	}
	if exists == 0 {
		return 0, baton.Errorf(baton.ECodeNotFound, "no session %s", sessionID)
	}
	t.w.seqs[sessionID] = last
	return last + 1, nil
}

// append numbers and inserts one event, filling ID and CreatedAt when
// they are empty. A payload that is not valid UTF-8 is refused: no events
// page may hold one.
func (t *wtx) append(e *baton.Event) error {
	if !utf8.Valid(e.Payload) {
		return fmt.Errorf("store: %s event payload is not valid UTF-8", e.Type)
	}
	if t.w.fence != nil {
		if err := t.fence(e.SessionID); err != nil {
			return err
		}
	}
	seq, err := t.nextSeq(e.SessionID)
	if err != nil {
		return err
	}
	if e.ID == "" {
		e.ID = baton.NewEventID()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = baton.Now()
	}
	e.Seq = seq
	t.events = append(t.events, e)
	t.touched = append(t.touched, e.SessionID)
	t.dirty = true
	d, text := t.w.bases.deltaOf(e)
	if e.Type == baton.EventProviderReq {
		t.requests = append(t.requests, providerRequest{e: e, depth: d.depth})
	}
	if t.deferred {
		t.pending = append(t.pending, pendingEvent{e: e, text: text, d: d})
		t.w.seqs[e.SessionID] = seq
		return nil
	}
	base, prefix, suffix := d.args()
	args := []any{e.SessionID, seq, e.ID, nullString(e.ClientKeyID), e.Type, text, baton.FormatTime(e.CreatedAt),
		base, prefix, suffix}
	if ps := t.bound(t.w.ins); ps != nil {
		_, err = ps.ExecContext(t.ctx, args...)
	} else {
		_, err = t.tx.ExecContext(t.ctx, t.w.ins.text, args...)
	}
	if err != nil {
		return fmt.Errorf("store: insert event: %w", err)
	}
	t.w.seqs[e.SessionID] = seq
	return nil
}

// payloadArg is the stored form of an event payload (an empty one is
// stored as an empty object), sharing the payload's bytes: both drivers
// copy an argument before the statement returns, and the bytes must not
// change until the append is committed. A provider.request payload
// carries the whole conversation; copying it on every append was half the
// writer's allocation.
func payloadArg(p json.RawMessage) string {
	if len(p) == 0 {
		return "{}"
	}
	return unsafe.String(unsafe.SliceData(p), len(p))
}

// reset undoes the numbering of a failed request's events.
func (t *wtx) reset() {
	for _, e := range t.events {
		e.Seq = 0
	}
}

// checkpointEvery is how much committed work (about one WAL frame per
// event) the writer lets pile up before it kicks the checkpointer: a
// page that several commits rewrote (a session's index leaf) is copied
// once per checkpoint, so rarer checkpoints copy fewer pages per event.
const checkpointEvery = 2048

// checkpointer copies committed WAL frames into the SQLite database file
// from a connection of its own. Its checkpoints are PASSIVE: they wait
// for no reader or writer, and the writer keeps committing meanwhile, so
// no commit pays for the copy (and its fsync) as an automatic checkpoint
// inside a commit does. The writer connection's wal_autocheckpoint stays
// as a backstop: the WAL is only restarted once a checkpoint copied all
// of it, which under steady load only a checkpoint between two commits
// does.
type checkpointer struct {
	db     *sql.DB
	log    *slog.Logger
	kicks  chan struct{}
	quit   chan struct{}
	exited chan struct{}

	runs   atomic.Int64 // checkpoints done, for tests and diagnostics
	frames atomic.Int64 // WAL frames at the last checkpoint
	copied atomic.Int64 // of which copied into the database file
}

func newCheckpointer(db *sql.DB, log *slog.Logger) *checkpointer {
	c := &checkpointer{
		db:     db,
		log:    log,
		kicks:  make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	go c.loop()
	return c
}

// kick asks for a checkpoint without waiting for it; kicks while one is
// pending coalesce.
func (c *checkpointer) kick() {
	select {
	case c.kicks <- struct{}{}:
	default:
	}
}

// stop waits for a running checkpoint, then for the goroutine to exit.
func (c *checkpointer) stop() {
	close(c.quit)
	<-c.exited
}

func (c *checkpointer) loop() {
	defer close(c.exited)
	for {
		select {
		case <-c.kicks:
			c.run()
		case <-c.quit:
			return
		}
	}
}

func (c *checkpointer) run() {
	start := time.Now()
	var busy, frames, copied int64
	err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	if err != nil {
		c.log.Warn("store: checkpoint failed", "err", err)
		return
	}
	c.frames.Store(frames)
	c.copied.Store(copied)
	c.runs.Add(1)
	c.log.Debug("store: checkpoint", "wal_frames", frames, "copied", copied, "duration", time.Since(start))
}
