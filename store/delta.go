package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/baton-engine/baton"
)

// A provider.request payload repeats the previous one's: the same leading
// fields, its messages and a few more, the same tools. The writer stores
// such a payload as a delta of the session's previous provider request,
// its base: the row keeps only the middle that differs, with the base's
// seq and the lengths of the prefix and suffix shared with the base's
// payload (columns base_seq, base_prefix, base_suffix; see migration 6).
// Reads put the whole payload back together (expand).

const (
	// maxChain (K) is how many deltas may follow a whole payload: a
	// request whose base is maxChain deep is stored whole, so a read
	// fetches at most maxChain bases to expand one row, and one request
	// in seventeen of a long session is stored whole.
	maxChain = 16
	// minShared is the least a delta must save: prefix and suffix
	// together at least this many bytes and half the payload.
	minShared = 512
	// defaultBaseBytes bounds the payloads the writer keeps as bases.
	defaultBaseBytes = 32 << 20
	// splitChunk is how many bytes commonPrefix and commonSuffix compare
	// at once.
	splitChunk = 256
)

// delta says how an event's payload is stored.
type delta struct {
	base           int64 // seq of the base; 0: the payload is whole
	prefix, suffix int   // bytes shared with the base's payload
	depth          int   // deltas from a whole payload to this one
}

// args returns the delta's column values (NULL for a whole payload).
func (d delta) args() (base, prefix, suffix any) {
	if d.base == 0 {
		return nil, nil, nil
	}
	return d.base, int64(d.prefix), int64(d.suffix)
}

// base is a session's last committed provider request, as the writer
// keeps it.
type base struct {
	session    string
	seq        int64
	depth      int
	payload    []byte // a copy: the caller's bytes may change once committed
	newer, old *base  // neighbours in the cache's use order
}

// baseCache holds one base per session, least recently used first out
// once the payloads' capacity passes limit. A miss only costs a whole
// payload. Only the writer goroutine uses it. Unlike the seq cache it
// needs no forgetting after a failed batch: it learns only committed
// rows, and those never change.
type baseCache struct {
	limit  int // bytes; set it on the writer goroutine
	size   int
	m      map[string]*base
	newest *base
	oldest *base
}

func newBaseCache(limit int) baseCache {
	return baseCache{limit: limit, m: make(map[string]*base)}
}

// unlink takes b out of the use order.
func (c *baseCache) unlink(b *base) {
	if b.newer != nil {
		b.newer.old = b.old
	} else {
		c.newest = b.old
	}
	if b.old != nil {
		b.old.newer = b.newer
	} else {
		c.oldest = b.newer
	}
	b.newer, b.old = nil, nil
}

// touch makes b, unlinked or not, the most recently used.
func (c *baseCache) touch(b *base) {
	if c.newest == b {
		return
	}
	if b.newer != nil { // linked, and not the newest
		c.unlink(b)
	}
	b.old = c.newest
	if c.newest != nil {
		c.newest.newer = b
	}
	c.newest = b
	if c.oldest == nil {
		c.oldest = b
	}
}

func (c *baseCache) remove(b *base) {
	c.unlink(b)
	delete(c.m, b.session)
	c.size -= cap(b.payload)
}

// deltaOf decides how e, numbered and of a known session, is stored: as
// a delta of its session's cached base when that saves enough and the
// chain is short enough, else whole. text is the payload column's value;
// it shares e.Payload's bytes (see payloadArg).
func (c *baseCache) deltaOf(e *baton.Event) (d delta, text string) {
	if e.Type != baton.EventProviderReq || len(e.Payload) < minShared {
		return delta{}, payloadArg(e.Payload)
	}
	b, ok := c.m[e.SessionID]
	if !ok {
		return delta{}, payloadArg(e.Payload)
	}
	c.touch(b)
	if b.depth >= maxChain || b.seq >= e.Seq {
		return delta{}, payloadArg(e.Payload)
	}
	p := e.Payload
	prefix, suffix := split(b.payload, p)
	if shared := prefix + suffix; shared < minShared || 2*shared < len(p) {
		return delta{}, payloadArg(p)
	}
	mid := p[prefix : len(p)-suffix]
	return delta{base: b.seq, prefix: prefix, suffix: suffix, depth: b.depth + 1},
		unsafe.String(unsafe.SliceData(mid), len(mid))
}

// put records the committed payload p of event seq, stored at depth, as
// its session's base. A payload too small to be worth a delta's base, or
// larger than half the cache, drops the session's entry instead.
func (c *baseCache) put(session string, seq int64, depth int, p json.RawMessage) {
	b, ok := c.m[session]
	if len(p) < minShared || len(p) > c.limit/2 {
		if ok {
			c.remove(b)
		}
		return
	}
	if !ok {
		b = &base{session: session}
		c.m[session] = b
	}
	c.touch(b)
	b.seq, b.depth = seq, depth
	if cap(b.payload) < len(p) {
		c.size -= cap(b.payload)
		// Room for the next few requests, which grow by a message or so.
		b.payload = make([]byte, 0, len(p)+len(p)/4)
		c.size += cap(b.payload)
	}
	b.payload = append(b.payload[:0], p...)
	for c.size > c.limit && c.oldest != b {
		c.remove(c.oldest)
	}
}

// split returns the lengths of the prefix and suffix base and p share,
// which do not overlap in either and end on UTF-8 sequence boundaries of
// p, so that the middle of p is valid UTF-8 text when p is.
func split(base, p []byte) (prefix, suffix int) {
	n := min(len(base), len(p))
	prefix = commonPrefix(base[:n], p[:n])
	suffix = commonSuffix(base[len(base)-n+prefix:], p[len(p)-n+prefix:])
	for prefix > 0 && prefix < len(p) && !utf8.RuneStart(p[prefix]) {
		prefix--
	}
	for suffix > 0 && !utf8.RuneStart(p[len(p)-suffix]) {
		suffix--
	}
	return prefix, suffix
}

// commonPrefix returns the length of the common prefix of a and b, which
// have the same length.
func commonPrefix(a, b []byte) int {
	i := 0
	for i+splitChunk <= len(a) && bytes.Equal(a[i:i+splitChunk], b[i:i+splitChunk]) {
		i += splitChunk
	}
	for i < len(a) && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix returns the length of the common suffix of a and b, which
// have the same length.
func commonSuffix(a, b []byte) int {
	n := len(a)
	i := 0
	for i+splitChunk <= n && bytes.Equal(a[n-i-splitChunk:n-i], b[n-i-splitChunk:n-i]) {
		i += splitChunk
	}
	for i < n && a[n-1-i] == b[n-1-i] {
		i++
	}
	return i
}

// ref is how a scanned row's payload is stored: whole (base 0) or as a
// delta of event base of the same session.
type ref struct {
	base, prefix, suffix int64
}

// scanRef reads the delta columns.
func scanRef(base, prefix, suffix sql.NullInt64) (ref, error) {
	if !base.Valid {
		return ref{}, nil
	}
	if !prefix.Valid || !suffix.Valid {
		return ref{}, errors.New("store: corrupt event delta: no prefix or suffix length")
	}
	return ref{base: base.Int64, prefix: prefix.Int64, suffix: suffix.Int64}, nil
}

// join rebuilds the payload of event seq, stored as mid and r, from its
// base's payload.
func (r ref) join(seq int64, baseP, mid []byte) (json.RawMessage, error) {
	if r.base >= seq || r.prefix < 0 || r.suffix < 0 || r.prefix+r.suffix > int64(len(baseP)) {
		return nil, fmt.Errorf("store: corrupt delta of event %d: base %d, prefix %d and suffix %d of %d bytes",
			seq, r.base, r.prefix, r.suffix, len(baseP))
	}
	p := make([]byte, 0, int(r.prefix)+len(mid)+int(r.suffix))
	p = append(p, baseP[:r.prefix]...)
	p = append(p, mid...)
	return append(p, baseP[len(baseP)-int(r.suffix):]...), nil
}

// eventKey names an event.
type eventKey struct {
	session string
	seq     int64
}

// expand replaces the stored middles of the delta rows among evs (refs[i]
// belongs to evs[i]; evs in Seq order) with whole payloads. A base among
// evs is used as it is; one before them is read, with its own bases.
//
// With max > 0 it stops before the first event whose whole payload would
// take the running total past max bytes (the first event is always kept)
// and leaves the rest unexpanded. It returns how many events it kept.
func (db *DB) expand(ctx context.Context, evs []*baton.Event, refs []ref, max int) (int, error) {
	var need map[eventKey]bool
	for i, r := range refs {
		if r.base != 0 {
			if need == nil {
				need = make(map[eventKey]bool)
			}
			need[eventKey{evs[i].SessionID, r.base}] = true
		}
	}
	if need == nil && max <= 0 {
		return len(evs), nil
	}
	known := make(map[eventKey]json.RawMessage, len(need))
	total := 0
	for i, e := range evs {
		if r := refs[i]; r.base != 0 {
			b, err := db.base(ctx, eventKey{e.SessionID, r.base}, known)
			if err != nil {
				return 0, err
			}
			if e.Payload, err = r.join(e.Seq, b, e.Payload); err != nil {
				return 0, err
			}
		}
		if total += len(e.Payload); max > 0 && i > 0 && total > max {
			return i, nil
		}
		if k := (eventKey{e.SessionID, e.Seq}); need[k] {
			known[k] = e.Payload
		}
	}
	return len(evs), nil
}

const baseRowSQL = `SELECT payload, base_seq, base_prefix, base_suffix FROM session_events
WHERE session_id = $1 AND seq = $2`

// base returns the whole payload of event k, from known or else read
// (with the bases it needs, each strictly earlier) and added to known.
func (db *DB) base(ctx context.Context, k eventKey, known map[eventKey]json.RawMessage) (json.RawMessage, error) {
	if p, ok := known[k]; ok {
		return p, nil
	}
	type stored struct {
		seq     int64
		payload []byte
		ref     ref
	}
	var chain []stored
	for at := k.seq; ; {
		s := stored{seq: at}
		var b, pre, suf sql.NullInt64
		err := db.queryRow(ctx, baseRowSQL, k.session, at).Scan(&s.payload, &b, &pre, &suf)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("store: corrupt delta: base event %d of session %s is missing", at, k.session)
		}
		if err != nil {
			return nil, fmt.Errorf("store: read delta base: %w", err)
		}
		if s.ref, err = scanRef(b, pre, suf); err != nil {
			return nil, err
		}
		chain = append(chain, s)
		if s.ref.base == 0 {
			break
		}
		if s.ref.base >= at {
			return nil, fmt.Errorf("store: corrupt delta of event %d: base %d does not precede it", at, s.ref.base)
		}
		at = s.ref.base
		if _, ok := known[eventKey{k.session, at}]; ok {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		s := chain[i]
		p := json.RawMessage(s.payload)
		if s.ref.base != 0 {
			var err error
			if p, err = s.ref.join(s.seq, known[eventKey{k.session, s.ref.base}], s.payload); err != nil {
				return nil, err
			}
		}
		known[eventKey{k.session, s.seq}] = p
	}
	return known[k], nil
}
