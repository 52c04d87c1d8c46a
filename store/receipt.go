package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

// StaleReceipt is how long an in-flight receipt may stand before a new
// request under its key takes it over: long past any request's lifetime,
// so only a node that crashed mid-request leaves one that old.
const StaleReceipt = 15 * time.Minute

var _ baton.ReceiptStore = (*DB)(nil)

const receiptCols = `scope, idem_key, fingerprint, state, status, content_type, body, created_at, completed_at`

func scanReceipt(s scanner) (*baton.Receipt, error) {
	var (
		r         baton.Receipt
		state, c  string
		completed sql.NullString
	)
	if err := s.Scan(&r.Scope, &r.Key, &r.Fingerprint, &state, &r.Status, &r.ContentType, &r.Body, &c, &completed); err != nil {
		return nil, err
	}
	r.State = baton.ReceiptState(state)
	var err error
	if r.CreatedAt, err = parseTime(c); err != nil {
		return nil, err
	}
	if r.CompletedAt, err = parseNullTime(completed); err != nil {
		return nil, err
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	return &r, nil
}

// BeginReceipt implements baton.ReceiptStore. The insert and the lookup
// run in one write transaction, so of concurrent requests under one key
// exactly one is fresh.
func (db *DB) BeginReceipt(ctx context.Context, scope, key, fingerprint string) (*baton.Receipt, bool, error) {
	var (
		out   *baton.Receipt
		fresh bool
	)
	err := db.w.do(ctx, func(t *wtx) error {
		out, fresh = nil, false
		now := baton.Now()
		n, err := t.execAffected(`INSERT INTO idempotency_receipts (scope, idem_key, fingerprint, state, body, created_at)
VALUES ($1, $2, $3, 'in_flight', $4, $5) ON CONFLICT (scope, idem_key) DO NOTHING`,
			scope, key, fingerprint, []byte{}, formatTime(now))
		if err != nil {
			return fmt.Errorf("begin receipt: %w", err)
		}
		if n == 1 {
			out = &baton.Receipt{Scope: scope, Key: key, Fingerprint: fingerprint,
				State: baton.ReceiptInFlight, Body: []byte{}, CreatedAt: now}
			fresh = true
			return nil
		}
		row := t.tx.QueryRowContext(t.ctx, `SELECT `+receiptCols+` FROM idempotency_receipts WHERE scope = $1 AND idem_key = $2`+t.w.lock, scope, key)
		r, err := scanReceipt(row)
		if errors.Is(err, sql.ErrNoRows) {
			// Abandoned by another node between the two statements
			// (PostgreSQL): answer as if still in flight; a retry runs.
			out = &baton.Receipt{Scope: scope, Key: key, Fingerprint: fingerprint,
				State: baton.ReceiptInFlight, Body: []byte{}, CreatedAt: now}
			return nil
		}
		if err != nil {
			t.dirty = true
			return fmt.Errorf("begin receipt: %w", err)
		}
		if r.State != baton.ReceiptInFlight || now.Sub(r.CreatedAt) < StaleReceipt {
			out = r
			return nil
		}
		// A crashed node's leftover: take it over.
		n, err = t.execAffected(`UPDATE idempotency_receipts SET fingerprint = $3, created_at = $4
WHERE scope = $1 AND idem_key = $2 AND state = 'in_flight' AND created_at = $5`,
			scope, key, fingerprint, formatTime(now), formatTime(r.CreatedAt))
		if err != nil {
			return fmt.Errorf("begin receipt: %w", err)
		}
		if n == 0 {
			out = r // another node took it over first
			return nil
		}
		r.Fingerprint, r.CreatedAt = fingerprint, now
		out, fresh = r, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, fresh, nil
}

// CompleteReceipt implements baton.ReceiptStore; a receipt that is not in
// flight is ECodeNotFound.
func (db *DB) CompleteReceipt(ctx context.Context, scope, key string, status int, contentType string, body []byte) error {
	if body == nil {
		body = []byte{}
	}
	return db.w.do(ctx, func(t *wtx) error {
		n, err := t.execAffected(`UPDATE idempotency_receipts
SET state = 'done', status = $3, content_type = $4, body = $5, completed_at = $6
WHERE scope = $1 AND idem_key = $2 AND state = 'in_flight'`,
			scope, key, status, contentType, body, formatTime(baton.Now()))
		if err != nil {
			return fmt.Errorf("complete receipt: %w", err)
		}
		if n == 0 {
			return baton.Errorf(baton.ECodeNotFound, "no receipt in flight for this idempotency key")
		}
		return nil
	})
}

// AbandonReceipt implements baton.ReceiptStore.
func (db *DB) AbandonReceipt(ctx context.Context, scope, key string) error {
	return db.w.do(ctx, func(t *wtx) error {
		if _, err := t.exec(`DELETE FROM idempotency_receipts WHERE scope = $1 AND idem_key = $2 AND state = 'in_flight'`,
			scope, key); err != nil {
			return fmt.Errorf("abandon receipt: %w", err)
		}
		return nil
	})
}

// SweepReceipts implements baton.ReceiptStore. In-flight receipts created
// before olderThan are deleted too: nothing runs that long.
func (db *DB) SweepReceipts(ctx context.Context, olderThan time.Time) (int, error) {
	var total int64
	err := db.w.do(ctx, func(t *wtx) error {
		total = 0
		cut := formatTime(olderThan)
		n, err := t.execAffected(`DELETE FROM idempotency_receipts WHERE state = 'done' AND completed_at < $1`, cut)
		if err != nil {
			return fmt.Errorf("sweep receipts: %w", err)
		}
		m, err := t.execAffected(`DELETE FROM idempotency_receipts WHERE state = 'in_flight' AND created_at < $1`, cut)
		if err != nil {
			return fmt.Errorf("sweep receipts: %w", err)
		}
		total = n + m
		return nil
	})
	if err != nil {
		return 0, err
	}
	return int(total), nil
}
