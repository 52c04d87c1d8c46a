// Package baton holds Baton's domain: the types every layer shares (profiles,
// keys, sessions, events, tool definitions), the service interfaces the
// adapters implement, and the one error type that carries a code from the
// bottom of the stack to a transport's mapping table.
//
// It imports only the standard library. Adapters (store, httpapi, adminapi,
// auth, config, engine) depend on it; it depends on none of them.
package baton

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Version is the server version reported by /api/v1/meta and `baton version`.
// Release builds override it with -ldflags "-X github.com/baton-engine/baton.Version=…".
var Version = "0.1.0"

// APIVersions lists the client API versions this server speaks.
var APIVersions = []string{"v1"}

// ID prefixes, as BAE uses them on the wire.
const (
	PrefixSession  = "ses_"
	PrefixEvent    = "evt_"
	PrefixKey      = "key_"
	PrefixProfile  = "pro_"
	PrefixSubagent = "sba_"
)

// NewID returns prefix followed by 32 lowercase hex characters drawn from
// 16 CSPRNG bytes.
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error.
	buf := make([]byte, len(prefix)+32)
	copy(buf, prefix)
	hex.Encode(buf[len(prefix):], b[:])
	return string(buf)
}

// NewEventID returns an event id: PrefixEvent and 32 lowercase hex
// characters like NewID, but the first 12 are the current Unix time in
// milliseconds and only the other 80 bits are random. Ids made later sort
// later, so the unique index on event ids grows at its right edge instead
// of touching a random page for every insert.
func NewEventID() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	buf := make([]byte, len(PrefixEvent)+32)
	copy(buf, PrefixEvent)
	hex.Encode(buf[len(PrefixEvent):], b[:])
	return string(buf)
}

// TimeLayout is the wire and storage format of every timestamp: UTC with
// millisecond precision.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Now returns the current UTC time truncated to milliseconds, the precision
// every stored timestamp has.
func Now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// FormatTime renders t in TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime parses a TimeLayout timestamp.
func ParseTime(s string) (time.Time, error) { return time.Parse(TimeLayout, s) }
