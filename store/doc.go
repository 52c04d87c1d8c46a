// Package store is Baton's durable store: the append-only session event log
// and the catalogue of profiles, keys, sessions and the executor resources
// (environments, machines, their credentials, installation settings), and
// the sessions' files and the executors' artifacts (filearea.Store, blobs
// kept in the rows, paths compared byte-wise). It implements
// baton.Store on SQLite (the default, through modernc.org/sqlite) or on
// PostgreSQL (through pgx), chosen by the URL given to Open.
//
// # Schema
//
// Both dialects share one schema shape, applied at Open from embedded,
// numbered, forward-only goose migrations (migrations/<dialect>/NNNNN_*.sql).
// Open refuses a database migrated by a newer Baton with ErrSchemaTooNew.
// Timestamps are TEXT in baton.TimeLayout and JSON is TEXT in both
// dialects, so values read back identically from either database. Deleted
// profiles, environments and machines and revoked keys and executor
// credentials are soft-deleted rows.
//
// # Writes
//
// Every write goes through one group-commit writer: a goroutine that owns
// the write connection, drains whatever requests are queued into one
// transaction and commits once, so a hundred concurrent appends cost one
// fsync. A write returns only after its transaction committed. A request
// that fails (a duplicate name, a closed session) is undone on its own,
// inside a savepoint when it had already written, and does not affect the
// others of its batch; if the commit fails, every request of the batch
// gets the error. Event sequence numbers are assigned by the writer from a
// per-session counter, so each session's log is numbered 1, 2, 3… without
// gaps.
//
// On SQLite the writer has the one write connection (WAL,
// synchronous=FULL) and reads use a separate query-only pool. A third
// connection runs PASSIVE checkpoints in the background every couple of
// thousand events, so no commit pays for copying the WAL back;
// wal_autocheckpoint(8192) on the writer is the backstop. On
// PostgreSQL both share one pool and a search_path given in the URL is
// honoured.
//
// # Provider requests
//
// A provider.request payload carries the whole conversation, so
// consecutive ones of a session are nearly identical. The writer keeps
// each session's last committed provider request in memory (32 MiB in
// all, least recently used out) and stores the next one, when they share
// enough, as a delta: only the bytes between the shared prefix and suffix,
// with the base's seq and the two lengths (split on UTF-8 boundaries). A
// base is always committed in an earlier transaction; at most 16 deltas
// follow a whole payload. Reads rebuild the whole payload, fetching bases
// outside the result; callers never see a delta.
//
// # One process per SQLite file
//
// Open takes an exclusive lock on "<db>.lock" beside a SQLite database
// and holds it until Close: a second Open of the file, from another
// process or another handle of this one, fails at once with ErrLocked.
// (flock(2) on unix systems, an unshared handle on Windows, none
// elsewhere; Options.SharedFile skips it.)
//
// # Cluster mode
//
// With Options.NodeID set on PostgreSQL, several stores (nodes) share the
// database as one Baton. Each open session is owned through a lease row
// (session_leases: node, epoch, expires_at) that the node acquires,
// renews and releases (AcquireLease, RenewLeases, ReleaseLease; nodes
// register in the nodes table), its expiry judged by the database's
// clock. The node tells the writer what it owns (Own, Disown), and every
// append is fenced: checked in the batch's transaction against the lease
// row, locked FOR SHARE until the commit, so a takeover (an UPDATE of the
// row bumping the epoch) waits for in-flight appends and later ones fail
// with baton.ECodeLeaseLost. A batch checks all its sessions with one
// statement; if a lease moved, it reruns with savepoints so that only the
// lost sessions' requests fail. Each committed batch also sends a
// pg_notify in its transaction naming each session's last seq, which a
// Listener on another node receives; after a lost connection the Listener
// delivers a resync, since the log, not the notification, is the truth.
//
// # Pages
//
// Lists are ordered by insertion. A cursor is the decimal ordering value of
// the last item returned (an event's Seq, a row's insertion number
// otherwise); the empty cursor is the first page and an empty next cursor
// means there is no further page.
package store
