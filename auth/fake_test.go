package auth

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// fakeKeys is an in-memory baton.KeyStore.
type fakeKeys struct {
	mu      sync.Mutex
	keys    []*baton.Key
	revoked map[string]bool

	pageCap int // when > 0, ListKeys returns at most this many per page

	byHash  int // KeyByHash calls
	lists   int // ListKeys calls
	touches []map[string]time.Time
	touchCh chan map[string]time.Time // when set, every TouchKeys call is sent here

	// Injected failures.
	errByHash, errList, errCreate, errRevoke, errTouch error
	// onByHash runs inside KeyByHash (used to race Forget).
	onByHash func()
	// onTouch runs inside TouchKeys, before it returns.
	onTouch func()
}

func newFakeKeys() *fakeKeys { return &fakeKeys{revoked: map[string]bool{}} }

func (f *fakeKeys) add(k *baton.Key) *baton.Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := *k
	f.keys = append(f.keys, &c)
	return k
}

func (f *fakeKeys) revoke(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[id] = true
}

func (f *fakeKeys) active(role baton.KeyRole) []*baton.Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*baton.Key
	for _, k := range f.keys {
		if k.Role == role && !f.revoked[k.ID] {
			c := *k
			out = append(out, &c)
		}
	}
	return out
}

func (f *fakeKeys) calls() (byHash, lists int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byHash, f.lists
}

func (f *fakeKeys) touched() []map[string]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]time.Time(nil), f.touches...)
}

func (f *fakeKeys) CreateKey(_ context.Context, k *baton.Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errCreate != nil {
		return f.errCreate
	}
	c := *k
	f.keys = append(f.keys, &c)
	return nil
}

func (f *fakeKeys) KeyByHash(_ context.Context, role baton.KeyRole, hash string) (*baton.Key, error) {
	f.mu.Lock()
	f.byHash++
	hook := f.onByHash
	var found *baton.Key
	err := f.errByHash
	if err == nil {
		for _, k := range f.keys {
			if k.Role == role && k.Hash == hash && !f.revoked[k.ID] {
				c := *k
				found = &c
			}
		}
	}
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, baton.Errorf(baton.ECodeNotFound, "no key")
	}
	return found, nil
}

func (f *fakeKeys) ListKeys(_ context.Context, role baton.KeyRole, page baton.Page) ([]*baton.Key, string, error) {
	f.mu.Lock()
	f.lists++
	err := f.errList
	f.mu.Unlock()
	if err != nil {
		return nil, "", err
	}
	all := f.active(role)
	start := 0
	if page.Cursor != "" {
		n, err := strconv.Atoi(page.Cursor)
		if err != nil {
			return nil, "", baton.Errorf(baton.ECodeBadRequest, "bad cursor")
		}
		start = n
	}
	limit := page.Limit
	if f.pageCap > 0 && f.pageCap < limit {
		limit = f.pageCap
	}
	end := min(start+limit, len(all))
	if start > end {
		start = end
	}
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, nil
}

func (f *fakeKeys) RevokeClientKey(context.Context, string, func(string) *baton.Event) ([]string, error) {
	panic("not used by auth")
}

func (f *fakeKeys) RevokeAdminKeys(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errRevoke != nil {
		return f.errRevoke
	}
	for _, k := range f.keys {
		if k.Role == baton.RoleAdmin {
			f.revoked[k.ID] = true
		}
	}
	return nil
}

func (f *fakeKeys) TouchKeys(_ context.Context, used map[string]time.Time) error {
	f.mu.Lock()
	c := make(map[string]time.Time, len(used))
	for k, v := range used {
		c[k] = v
	}
	f.touches = append(f.touches, c)
	err := f.errTouch
	ch := f.touchCh
	hook := f.onTouch
	f.mu.Unlock()
	if ch != nil {
		ch <- c
	}
	if hook != nil {
		hook()
	}
	return err
}

func (f *fakeKeys) setErr(p *error, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*p = err
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logRecorder is a slog.Handler that keeps records.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// messages returns "LEVEL message" for every record.
func (l *logRecorder) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		out = append(out, r.Level.String()+" "+r.Message)
	}
	return out
}
