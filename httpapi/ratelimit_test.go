package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRateLimitBucket(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewRateLimiter(RateLimitOptions{Rate: 2, Burst: 3, Now: clk.now})
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("past the burst: ok=%v wait=%v, want refused with 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another caller shares the bucket")
	}
	clk.add(499 * time.Millisecond)
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("a token appeared early")
	}
	clk.add(time.Millisecond)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("no token after 1/rate seconds")
	}
	// A long pause refills to the burst, no further.
	clk.add(time.Hour)
	n := 0
	for {
		if ok, _ := l.Allow("a"); !ok {
			break
		}
		n++
	}
	if n != 3 {
		t.Fatalf("after a long pause %d requests passed, want the burst 3", n)
	}
}

func TestRateLimitOff(t *testing.T) {
	if l := NewRateLimiter(RateLimitOptions{Rate: 0, Burst: 5}); l != nil {
		t.Fatal("rate 0 must turn the limiter off")
	}
	var l *RateLimiter
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if h := l.Wrap(next); h == nil {
		t.Fatal("nil limiter must pass through")
	}
}

func TestRateLimitEviction(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewRateLimiter(RateLimitOptions{Rate: 1, Burst: 1, MaxKeys: rateShards * 4, Now: clk.now})
	for i := range 10000 {
		l.Allow("caller-" + strconv.Itoa(i))
	}
	if n := l.Len(); n > rateShards*4 {
		t.Fatalf("%d buckets held, bound is %d", n, rateShards*4)
	}
	// Once idle (refilled) they are dropped at the next sweep.
	clk.add(2 * time.Minute)
	l.Allow("fresh")
	l.Allow("fresh2")
	for i := range rateShards * 8 {
		l.Allow("late-" + strconv.Itoa(i))
	}
	clk.add(2 * time.Minute)
	for i := range rateShards * 2 {
		l.Allow("x-" + strconv.Itoa(i))
	}
	if n := l.Len(); n > rateShards*4 {
		t.Fatalf("%d buckets after idle sweeps", n)
	}
}

func TestRateLimitHTTP(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewRateLimiter(RateLimitOptions{Rate: 0.25, Burst: 1, Now: clk.now})
	h := l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	send := func(path, token, addr string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = addr
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	tests := []struct {
		name, path, token, addr string
		status                  int
		body                    string
	}{
		{"first v1", "/v1/sessions/x/clients", "tok", "10.0.0.1:1", 204, ""},
		{"second v1 is 429 envelope", "/v1/sessions/x/clients", "tok", "10.0.0.1:1", 429,
			`{"error":{"code":"too_many_requests","message":"rate limit exceeded; retry after 4 s"}}`},
		{"same token other address still limited, api problem", "/api/v1/meta", "tok", "10.0.0.2:1", 429, `"type":"too_many_requests"`},
		{"healthz is never limited", "/healthz", "tok", "10.0.0.1:1", 204, ""},
		{"another token has its own bucket", "/api/v1/meta", "tok2", "10.0.0.1:1", 204, ""},
		{"anonymous: per address", "/api/v1/meta", "", "10.0.0.9:5", 204, ""},
		{"anonymous same address other port", "/api/v1/meta", "", "10.0.0.9:6", 429, `"status":429`},
		{"anonymous other address", "/api/v1/meta", "", "10.0.0.8:5", 204, ""},
	}
	for _, tc := range tests {
		w := send(tc.path, tc.token, tc.addr)
		if w.Code != tc.status {
			t.Fatalf("%s: status %d, want %d (%s)", tc.name, w.Code, tc.status, w.Body)
		}
		if !strings.Contains(w.Body.String(), tc.body) {
			t.Fatalf("%s: body %s, want %s", tc.name, w.Body, tc.body)
		}
		if tc.status == 429 && w.Header().Get("Retry-After") != "4" {
			t.Fatalf("%s: Retry-After %q, want 4", tc.name, w.Header().Get("Retry-After"))
		}
	}
	clk.add(4 * time.Second)
	if w := send("/v1/a", "tok", "10.0.0.1:1"); w.Code != 204 {
		t.Fatalf("after Retry-After: %d", w.Code)
	}
}

func BenchmarkRateLimit(b *testing.B) {
	b.ReportAllocs()
	l := NewRateLimiter(RateLimitOptions{Rate: 1e9, Burst: 1 << 30})
	h := l.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/v1/a", nil)
	r.Header.Set("Authorization", "Bearer bae_ses_0123456789abcdef")
	w := httptest.NewRecorder()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
