package store

import (
	"context"
	"database/sql"
)

// Reads on hot paths go through statements prepared once per query text
// and kept for the life of the DB: on SQLite, preparing costs more than a
// point read itself. database/sql re-prepares a statement on each pooled
// connection it lands on and closes them all with the pool.

// prepared returns the kept statement for q, preparing it on first use;
// nil when it cannot be prepared (the caller then queries directly, which
// reports the error).
func (db *DB) prepared(ctx context.Context, q string) *sql.Stmt {
	if st, ok := db.stmts.Load(q); ok {
		return st.(*sql.Stmt)
	}
	st, err := db.read.PrepareContext(context.WithoutCancel(ctx), q)
	if err != nil {
		return nil
	}
	if prev, loaded := db.stmts.LoadOrStore(q, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt)
	}
	return st
}

// queryRow runs a single-row read of the reader pool.
func (db *DB) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st := db.prepared(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.read.QueryRowContext(ctx, q, args...)
}

// query runs a multi-row read of the reader pool.
func (db *DB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := db.prepared(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.read.QueryContext(ctx, q, args...)
}
