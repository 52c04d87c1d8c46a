package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// ListenerOptions configure a Listener.
type ListenerOptions struct {
	// OnNotice receives each decoded notice of another node, and a Resync
	// notice after every reconnection, from the listener's goroutine, in
	// arrival order. It should not block for long: notices queue in the
	// connection meanwhile.
	OnNotice func(Notice)
	// Logger receives connection losses and undecodable payloads; nil
	// discards them.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts, doubled after each failure (50ms and 5s when <= 0).
	MinBackoff, MaxBackoff time.Duration
}

// Listener receives the doorbells other nodes ring on commit (notify.go)
// on a connection of its own, outside the store's pool. It skips its own
// node's. When the connection is lost it reconnects, with backoff, and
// then delivers a Resync notice: whatever was announced meanwhile is lost,
// and the caller rereads the logs it follows. Its goroutine runs from Open
// to Close.
type Listener struct {
	url, channel, node string
	opts               ListenerOptions
	log                *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	pid atomic.Uint32 // backend of the current connection, for tests
}

// NewListener returns a listener on db's channel. db must be a PostgreSQL
// store; its NodeID names the notices to skip.
func NewListener(db *DB, opts ListenerOptions) (*Listener, error) {
	if db.dialect != DialectPostgres {
		return nil, errSingleNode()
	}
	if opts.OnNotice == nil {
		return nil, errors.New("store: listener needs OnNotice")
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 50 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{url: db.url, channel: db.channel, node: db.node, opts: opts, log: log}, nil
}

// Open connects and starts listening: notices committed after Open
// returns are delivered. A first connection that fails is an error.
func (l *Listener) Open(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(lctx, conn)
	return nil
}

// Close stops the listener and closes its connection.
func (l *Listener) Close() error {
	l.once.Do(func() {
		if l.cancel != nil {
			l.cancel()
			<-l.done
		}
	})
	return nil
}

func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, l.url)
	if err != nil {
		return nil, fmt.Errorf("store: listener connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("store: listen: %w", err)
	}
	l.pid.Store(conn.PgConn().PID())
	return conn, nil
}

func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	for {
		n, err := conn.WaitForNotification(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			l.log.Warn("store: listener lost its connection; reconnecting", "err", err)
			_ = conn.Close(context.Background())
			if conn = l.reconnect(ctx); conn == nil {
				return
			}
			l.opts.OnNotice(Notice{Resync: true})
			continue
		}
		notice, err := DecodeNotice(n.Payload)
		if err != nil {
			l.log.Warn("store: undecodable notice", "err", err, "bytes", len(n.Payload))
			continue
		}
		if notice.Node != l.node {
			l.opts.OnNotice(notice)
		}
	}
}

// reconnect retries until it is connected (or ctx ends: nil).
func (l *Listener) reconnect(ctx context.Context) *pgx.Conn {
	wait := l.opts.MinBackoff
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := l.connect(ctx)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		l.log.Warn("store: listener reconnect failed", "err", err, "retry_in", wait)
		wait = min(2*wait, l.opts.MaxBackoff)
	}
}
