package baton

import (
	"context"
	"time"
)

// ReceiptState is where an idempotent request stands.
type ReceiptState string

// Receipt states.
const (
	ReceiptInFlight ReceiptState = "in_flight" // the first request is still running
	ReceiptDone     ReceiptState = "done"      // its response is saved
)

// Receipt is the saved outcome of a mutating request sent with an
// Idempotency-Key. Scope names the caller and the operation (a digest of
// the caller's key id, the method and the route, its resource ids in one
// spelling); Fingerprint is a digest of the input.
// Body never holds a fresh-only secret: it is stored as it is replayed.
type Receipt struct {
	Scope       string
	Key         string
	Fingerprint string
	State       ReceiptState
	Status      int    // HTTP status; 0 while in flight
	ContentType string // the response's Content-Type
	Body        []byte
	CreatedAt   time.Time
	CompletedAt *time.Time
}

// ReceiptStore keeps idempotency receipts. Every node of a deployment
// shares it, and receipts survive a restart.
type ReceiptStore interface {
	// BeginReceipt records (scope, key) as in flight with fingerprint and
	// reports fresh = true, or returns the receipt already recorded under
	// (scope, key) with fresh = false. An in-flight receipt left behind
	// by a crashed node long ago is taken over as fresh.
	BeginReceipt(ctx context.Context, scope, key, fingerprint string) (r *Receipt, fresh bool, err error)
	// CompleteReceipt saves the response of the in-flight receipt (scope,
	// key) and marks it done.
	CompleteReceipt(ctx context.Context, scope, key string, status int, contentType string, body []byte) error
	// AbandonReceipt deletes the in-flight receipt (scope, key), so that a
	// retry executes again; a done receipt is left alone.
	AbandonReceipt(ctx context.Context, scope, key string) error
	// SweepReceipts deletes the done receipts completed before olderThan
	// and returns how many it deleted.
	SweepReceipts(ctx context.Context, olderThan time.Time) (int, error)
}
