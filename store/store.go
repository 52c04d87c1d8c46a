package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-engine/baton"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Dialect names returned by DB.Dialect.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// DefaultMaxBatch is the group-commit batch cap when Options.MaxBatch is not
// set.
const DefaultMaxBatch = 512

// DefaultEventPageBytes is the payload byte budget of one Events page when
// Options.EventPageBytes is not set.
const DefaultEventPageBytes = 16 << 20

// ErrSchemaTooNew is returned by Open when the database was migrated by a
// newer Baton than this one: its schema version is past the last embedded
// migration.
var ErrSchemaTooNew = errors.New("store: database schema is newer than this binary supports")

// ErrClosed is returned by writes submitted after Close.
var ErrClosed = errors.New("store: closed")

//go:embed migrations
var migrations embed.FS

// Options configure Open.
type Options struct {
	// URL selects the database: "postgres://…" or "postgresql://…" is a
	// PostgreSQL connection URL (a search_path parameter is honoured);
	// anything else is a SQLite file path, optionally "file:"-prefixed.
	URL string
	// Logger receives migration and writer diagnostics; nil discards them.
	Logger *slog.Logger
	// MaxBatch caps how many write requests share one transaction
	// (DefaultMaxBatch when <= 0).
	MaxBatch int
	// OnCommit, when set, receives the events of each committed
	// transaction in commit order (each session's in Seq order), from the
	// writer goroutine, before any caller is told of the commit. It must
	// not block, keep the slice, or call back into the store.
	OnCommit func([]*baton.Event)
	// EventPageBytes caps the payload bytes of one Events page
	// (DefaultEventPageBytes when <= 0): a page ends early, with a next
	// cursor, before the event that would pass it. A page always holds at
	// least one event, however large, so paging progresses.
	EventPageBytes int
	// SharedFile opens a SQLite file without its single-process lock (see
	// ErrLocked), so that it is neither refused by nor refuses another
	// handle: for tests and inspection tools that knowingly open a file a
	// running server holds. Ignored on PostgreSQL.
	SharedFile bool
	// NodeID, when set on PostgreSQL, turns on cluster mode (see the
	// package doc): appends are fenced by this node's session leases
	// (Own, Disown), each commit notifies the other nodes (Listener), and
	// CreateSession of an open session takes its lease at epoch 1 for
	// LeaseTTL (DefaultLeaseTTL when <= 0). It must be non-empty text
	// without spaces. Ignored on SQLite, which serves one node.
	NodeID   string
	LeaseTTL time.Duration
}

// DB is an open store. It is safe for concurrent use.
type DB struct {
	url     string
	dialect string
	log     *slog.Logger
	read    *sql.DB // reader pool (query_only on SQLite)
	write   *sql.DB // the writer's connection (the same pool on PostgreSQL)
	ckpt    *sql.DB // the checkpointer's connection (SQLite only)
	w       *writer
	once    sync.Once
	err     error
	stmts   sync.Map // query text → *sql.Stmt on read (stmt.go)

	profiles   sync.Map     // profile id → cachedProfile
	profileGen atomic.Int64 // bumped by every profile change

	pageBytes int // payload byte budget of an Events page

	lock *fileLock // SQLite: held for the store's life (lock.go)

	channel  string        // PostgreSQL: the schema's notify channel (notify.go)
	node     string        // cluster mode: this node's id
	leaseTTL time.Duration // cluster mode: the lease CreateSession takes
}

var _ baton.Store = (*DB)(nil)

// Open opens the database named by opts.URL, applies pending migrations and
// starts the writer. A database whose schema is newer than the embedded
// migrations is refused with ErrSchemaTooNew.
func Open(ctx context.Context, opts Options) (*DB, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.URL == "" {
		return nil, errors.New("store: empty URL")
	}
	db := &DB{url: opts.URL, log: log, pageBytes: opts.EventPageBytes, leaseTTL: opts.LeaseTTL}
	if db.leaseTTL <= 0 {
		db.leaseTTL = DefaultLeaseTTL
	}
	if db.pageBytes <= 0 {
		db.pageBytes = DefaultEventPageBytes
	}
	var err error
	if isPostgres(opts.URL) {
		db.dialect = DialectPostgres
		if opts.NodeID != "" && !validName(opts.NodeID) {
			return nil, fmt.Errorf("store: node id %q must be 1-200 bytes without spaces", opts.NodeID)
		}
		db.node = opts.NodeID
		err = db.openPostgres(ctx, opts.URL)
	} else {
		db.dialect = DialectSQLite
		err = db.openSQLite(ctx, opts.URL, !opts.SharedFile)
	}
	if err != nil {
		return nil, err
	}
	maxBatch := opts.MaxBatch
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	db.w, err = newWriter(ctx, db.write, db.dialect == DialectSQLite, maxBatch, log)
	if err == nil {
		db.w.onCommit = opts.OnCommit
		if db.node != "" {
			db.w.fence = newFencer(db.node)
			db.w.notify = db.channel
		}
		if db.ckpt != nil {
			db.w.ckpt = newCheckpointer(db.ckpt, log)
		}
	}
	if err != nil {
		db.closeDBs()
		return nil, err
	}
	return db, nil
}

func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

func (db *DB) openPostgres(ctx context.Context, url string) error {
	pool, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("store: open postgres: %w", err)
	}
	pool.SetMaxOpenConns(max(8, 2*runtime.GOMAXPROCS(0)))
	pool.SetMaxIdleConns(max(8, 2*runtime.GOMAXPROCS(0)))
	db.read, db.write = pool, pool
	if err := pool.PingContext(ctx); err != nil {
		db.closeDBs()
		return fmt.Errorf("store: connect postgres: %w", err)
	}
	// Nodes sharing a schema migrate one at a time; different schemas (as
	// the tests use) do not wait for each other.
	var schema sql.NullString
	if err := pool.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		db.closeDBs()
		return fmt.Errorf("store: connect postgres: %w", err)
	}
	db.channel = notifyChannel(schema.String)
	h := fnv.New64a()
	h.Write([]byte("baton migrations " + schema.String))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 300))
	if err != nil {
		db.closeDBs()
		return fmt.Errorf("store: migration lock: %w", err)
	}
	if err := db.migrate(ctx, goose.DialectPostgres, goose.WithSessionLocker(locker)); err != nil {
		db.closeDBs()
		return err
	}
	return nil
}

const (
	// sqliteWriteParams are the writer connection's settings: WAL, an fsync
	// per commit, a generous busy timeout for other processes (baton admin
	// against a live file), foreign keys, and BEGIN IMMEDIATE. The
	// checkpointer copies the WAL into the database in the background;
	// the commit that finds the WAL past sqliteWALFrames pages checkpoints
	// the rest itself, so that the next one can restart the WAL.
	sqliteWriteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)" +
		"&_pragma=foreign_keys(1)&_pragma=wal_autocheckpoint(" + sqliteWALFrames + ")&_txlock=immediate"
	sqliteWALFrames = "8192" // 32 MiB of 4 KiB pages
	// sqliteCheckpointParams are the checkpointer connection's settings.
	sqliteCheckpointParams = "_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)"
	// sqliteReadParams are the reader pool's settings.
	sqliteReadParams = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=query_only(1)"
)

// sqlitePath splits a SQLite URL into the name SQLite opens, its query
// and the file's path.
func sqlitePath(url string) (base, query, path string, err error) {
	base, query, _ = strings.Cut(url, "?")
	path = base
	if p, ok := strings.CutPrefix(base, "file:"); ok {
		path = p
		if strings.HasPrefix(path, "///") { // file:///abs/path
			path = path[2:]
		}
	}
	if path == "" || path == ":memory:" {
		return "", "", "", errors.New("store: SQLite needs a file path")
	}
	return base, query, path, nil
}

func (db *DB) openSQLite(ctx context.Context, url string, lock bool) error {
	base, query, path, err := sqlitePath(url)
	if err != nil {
		return err
	}
	if err := createPrivate(path); err != nil {
		return err
	}
	if lock {
		// Before SQLite opens the file: a second process fails at once
		// rather than after a busy timeout, or worse, not at all.
		if db.lock, err = lockFile(path); err != nil {
			return err
		}
	}
	dsn := func(params string) string {
		if query != "" {
			params = query + "&" + params
		}
		return base + "?" + params
	}
	w, err := sql.Open("sqlite", dsn(sqliteWriteParams))
	if err != nil {
		db.closeDBs()
		return fmt.Errorf("store: open sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db.write = w
	if err := w.PingContext(ctx); err != nil {
		db.closeDBs()
		return fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	if err := db.migrate(ctx, goose.DialectSQLite3); err != nil {
		db.closeDBs()
		return err
	}
	r, err := sql.Open("sqlite", dsn(sqliteReadParams))
	if err != nil {
		db.closeDBs()
		return fmt.Errorf("store: open sqlite readers: %w", err)
	}
	n := max(4, 2*runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	db.read = r
	c, err := sql.Open("sqlite", dsn(sqliteCheckpointParams))
	if err != nil {
		db.closeDBs()
		return fmt.Errorf("store: open sqlite checkpointer: %w", err)
	}
	c.SetMaxOpenConns(1)
	c.SetMaxIdleConns(1)
	c.SetConnMaxLifetime(0)
	c.SetConnMaxIdleTime(0)
	db.ckpt = c
	return nil
}

// createPrivate creates the database's missing directories with mode 0700
// and a missing database file with mode 0600, past the umask, before
// SQLite opens it: the database holds the key that signs executor tokens,
// and SQLite gives the WAL, shared-memory and journal files it creates the
// database file's own mode. An existing file or directory keeps its mode
// (the server warns about loose ones; it does not change them).
func createPrivate(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("store: create data directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: create database file: %w", err)
	}
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: create database file: %w", err)
	}
	return nil
}

// migrationFS returns the dialect's embedded migrations.
func migrationFS(dialect goose.Dialect) (fs.FS, error) {
	dir := "migrations/sqlite"
	if dialect == goose.DialectPostgres {
		dir = "migrations/postgres"
	}
	return fs.Sub(migrations, dir)
}

func (db *DB) provider(dialect goose.Dialect, conn *sql.DB, opts ...goose.ProviderOption) (*goose.Provider, error) {
	fsys, err := migrationFS(dialect)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	opts = append(opts, goose.WithDisableGlobalRegistry(true), goose.WithSlog(db.log))
	p, err := goose.NewProvider(dialect, conn, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// migrate refuses a too-new schema, then applies pending migrations.
func (db *DB) migrate(ctx context.Context, dialect goose.Dialect, opts ...goose.ProviderOption) error {
	p, err := db.provider(dialect, db.write, opts...)
	if err != nil {
		return err
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	if current > target {
		return fmt.Errorf("%w (database at version %d, binary knows up to %d)", ErrSchemaTooNew, current, target)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	for _, r := range res {
		db.log.Info("store migration applied", "dialect", db.dialect, "version", r.Source.Version, "duration", r.Duration)
	}
	return nil
}

// Dialect reports "sqlite" or "postgres".
func (db *DB) Dialect() string { return db.dialect }

// SchemaVersion returns the version of the last migration applied to the
// database.
func (db *DB) SchemaVersion(ctx context.Context) (int64, error) {
	var v sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT MAX(version_id) FROM goose_db_version WHERE is_applied`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return v.Int64, nil
}

// Close stops the writer once every queued write is committed, then closes
// the connections. Writes submitted afterwards fail with ErrClosed.
func (db *DB) Close() error {
	db.once.Do(func() {
		db.w.stop()
		if db.w.ckpt != nil {
			db.w.ckpt.stop()
		}
		db.err = db.closeDBs()
	})
	return db.err
}

func (db *DB) closeDBs() error {
	var errs []error
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	if db.ckpt != nil {
		errs = append(errs, db.ckpt.Close())
	}
	if db.write != nil && db.write != db.read {
		errs = append(errs, db.write.Close())
	}
	errs = append(errs, db.lock.release()) // last: the connections are closed
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Files names what a SQLite store at url keeps on disk: the directory that
// holds the database, then the database and the WAL, shared-memory and
// rollback-journal files SQLite keeps beside it, and the store's lock file
// (each may or may not exist at a given moment). A PostgreSQL URL, or one naming no file, has none.
func Files(url string) (dir string, files []string) {
	if isPostgres(url) {
		return "", nil
	}
	_, _, path, err := sqlitePath(url)
	if err != nil {
		return "", nil
	}
	return filepath.Dir(path), []string{path, path + "-wal", path + "-shm", path + "-journal", lockPath(path)}
}
