package store

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/baton-engine/baton"
)

// fencer is what the writer knows of this node's leases in cluster mode:
// which sessions it owns at which epoch. Every append to a session is
// checked, in the batch's transaction, against the session's lease row,
// locked FOR SHARE until the commit: a takeover (an UPDATE of the row,
// store/cluster.go) therefore waits for the appends that passed the check,
// and appends that come after it fail it. The check is made once per
// session per batch.
type fencer struct {
	node string

	mu    sync.Mutex
	owned map[string]ownership
}

// ownership is a session this node owns. reload says the writer's cached
// last seq of the session predates the ownership (another node may have
// appended since) and must be read again.
type ownership struct {
	epoch  int64
	reload bool
}

func newFencer(node string) *fencer {
	return &fencer{node: node, owned: make(map[string]ownership)}
}

func (f *fencer) own(sessionID string, epoch int64, reload bool) {
	f.mu.Lock()
	f.owned[sessionID] = ownership{epoch: epoch, reload: reload}
	f.mu.Unlock()
}

func (f *fencer) disown(sessionID string) {
	f.mu.Lock()
	delete(f.owned, sessionID)
	f.mu.Unlock()
}

// owns reports whether this node owns sessionID.
func (f *fencer) owns(sessionID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.owned[sessionID]
	return ok
}

// take returns the session's ownership and clears its reload flag.
func (f *fencer) take(sessionID string) (ownership, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.owned[sessionID]
	if ok && o.reload {
		f.owned[sessionID] = ownership{epoch: o.epoch}
	}
	return o, ok
}

// Own tells the store this node owns sessionID at epoch (a lease it
// acquired): appends to the session are accepted while the lease row
// still says this node and this epoch. Call it after AcquireLease and
// before appending; it drops the writer's cached last seq of the session,
// since another node may have appended meanwhile. It is cheap and safe for
// concurrent use; without cluster mode it does nothing.
func (db *DB) Own(sessionID string, epoch int64) {
	if db.w.fence != nil {
		db.w.fence.own(sessionID, epoch, true)
	}
}

// Disown tells the store this node no longer owns sessionID: later
// appends to it fail with ECodeLeaseLost. Without cluster mode it does
// nothing.
func (db *DB) Disown(sessionID string) {
	if db.w.fence != nil {
		db.w.fence.disown(sessionID)
	}
}

// errLeaseLost is the error of an append the fence refused.
func errLeaseLost(sessionID, why string) error {
	return baton.Errorf(baton.ECodeLeaseLost, "session %s: %s", sessionID, why)
}

// fenceState is a session's fence in one attempt: the epoch the batch
// appends under, or the error every append to it gets.
type fenceState struct {
	epoch int64
	err   error
}

const (
	fenceOneSQL = `SELECT node_id, epoch FROM session_leases WHERE session_id = $1 FOR SHARE`
	fenceAllSQL = `SELECT session_id, node_id, epoch FROM session_leases WHERE session_id = ANY($1::text[]) FOR SHARE`
)

// fence checks, once per session per attempt, that this node may append
// to sessionID. In a deferred (first) attempt it only notes the epoch:
// checkFences verifies them all with one statement before the commit.
// Otherwise it reads and locks the lease row now.
func (t *wtx) fence(sessionID string) error {
	f := t.w.fence
	if st, ok := t.fences[sessionID]; ok {
		return st.err
	}
	if t.fences == nil {
		t.fences = make(map[string]fenceState)
	}
	o, ok := f.take(sessionID)
	if o.reload {
		delete(t.w.seqs, sessionID)
	}
	if !ok {
		st := fenceState{err: errLeaseLost(sessionID, "this node does not own it")}
		t.fences[sessionID] = st
		return st.err
	}
	st := fenceState{epoch: o.epoch}
	if t.deferred {
		t.fences[sessionID] = st
		t.unchecked = append(t.unchecked, sessionID)
		return nil
	}
	var node string
	var epoch int64
	err := t.scanRow(t.tx.QueryRowContext(t.ctx, fenceOneSQL, sessionID), []any{&node, &epoch})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		st.err = errLeaseLost(sessionID, "it has no lease")
	case err != nil:
		return fmt.Errorf("store: check lease: %w", err)
	case node != f.node || epoch != o.epoch:
		st.err = errLeaseLost(sessionID, fmt.Sprintf("its lease moved to node %s at epoch %d", node, epoch))
	}
	t.fences[sessionID] = st
	// The row lock lives in this request's savepoint: forgotten if it is
	// rolled back.
	t.fenced = append(t.fenced, sessionID)
	return st.err
}

// claim records that the request created sessionID's lease at epoch 1 in
// this transaction: it appends under it, and owns the session once
// committed.
func (t *wtx) claim(sessionID string) {
	if t.fences == nil {
		t.fences = make(map[string]fenceState)
	}
	t.fences[sessionID] = fenceState{epoch: 1}
	t.fenced = append(t.fenced, sessionID)
	t.claims = append(t.claims, sessionID)
}

// unfence forgets the fences a rolled-back request checked or claimed.
func (t *wtx) unfence() {
	for _, id := range t.fenced {
		delete(t.fences, id)
	}
}

// checkFences verifies, with one statement that locks the rows until the
// commit, the leases a deferred attempt appended under. It reports false
// when one moved: the attempt is then rerun with a check per append.
func (b *txn) checkFences() (bool, error) {
	if len(b.unchecked) == 0 {
		return true, nil
	}
	rows, err := b.tx.QueryContext(b.ctx, fenceAllSQL, b.unchecked)
	if err != nil {
		return false, fmt.Errorf("store: check leases: %w", err)
	}
	defer rows.Close()
	ok := 0
	for rows.Next() {
		var id, node string
		var epoch int64
		if err := rows.Scan(&id, &node, &epoch); err != nil {
			return false, fmt.Errorf("store: check leases: %w", err)
		}
		if st, seen := b.fences[id]; seen && st.err == nil && node == b.w.fence.node && epoch == st.epoch {
			ok++
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("store: check leases: %w", err)
	}
	return ok == len(b.unchecked), nil
}
