package httpapi

import (
	"crypto/sha256"
	"hash/maphash"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// DefaultRateKeys bounds how many callers a RateLimiter tracks at once.
const DefaultRateKeys = 1 << 16

// rateShards is the number of independently locked parts of the bucket map.
const rateShards = 32

// RateLimitOptions configure a RateLimiter.
type RateLimitOptions struct {
	Rate    float64          // requests per second per caller; <= 0 turns limiting off
	Burst   int              // bucket size; <= 0 means max(1, ceil(Rate))
	MaxKeys int              // callers tracked at once; <= 0 means DefaultRateKeys
	Now     func() time.Time // the clock; nil means time.Now
}

// RateLimiter is a token bucket per caller: the bearer token's digest, or
// the remote IP for requests without one. Buckets that have refilled
// completely are indistinguishable from new ones and are dropped, so memory
// stays bounded by MaxKeys. It is safe for concurrent use.
type RateLimiter struct {
	rate  float64
	burst float64
	per   int // keys per shard
	idle  time.Duration
	now   func() time.Time
	seed  maphash.Seed
	parts [rateShards]rateShard
}

type rateShard struct {
	mu    sync.Mutex
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewRateLimiter returns a limiter for opts, or nil when opts.Rate <= 0.
func NewRateLimiter(opts RateLimitOptions) *RateLimiter {
	if opts.Rate <= 0 {
		return nil
	}
	burst := opts.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(opts.Rate)))
	}
	keys := opts.MaxKeys
	if keys <= 0 {
		keys = DefaultRateKeys
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	l := &RateLimiter{
		rate: opts.Rate, burst: float64(burst), now: now, seed: maphash.MakeSeed(),
		per: max(1, keys/rateShards),
		// Time for an empty bucket to refill: after it, a bucket is idle.
		idle: time.Duration(float64(burst) / opts.Rate * float64(time.Second)),
	}
	for i := range l.parts {
		l.parts[i].m = make(map[string]*bucket)
	}
	return l
}

// Allow takes a token from key's bucket. When there is none it reports
// false and how long until there will be.
func (l *RateLimiter) Allow(key string) (bool, time.Duration) {
	now := l.now()
	p := &l.parts[maphash.String(l.seed, key)%rateShards]
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.m[key]
	if b == nil {
		if len(p.m) >= l.per || now.Sub(p.swept) > max(l.idle, time.Minute) {
			l.sweep(p, now)
		}
		b = &bucket{tokens: l.burst, last: now}
		p.m[key] = b
	} else if el := now.Sub(b.last); el > 0 {
		b.tokens = min(l.burst, b.tokens+el.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// sweep drops p's idle buckets and, if p is still full, one more.
func (l *RateLimiter) sweep(p *rateShard, now time.Time) {
	p.swept = now
	for k, b := range p.m {
		if now.Sub(b.last) >= l.idle {
			delete(p.m, k)
		}
	}
	for k := range p.m {
		if len(p.m) < l.per {
			break
		}
		delete(p.m, k) // under a flood of new callers: someone starts over
	}
}

// Len returns how many buckets the limiter holds.
func (l *RateLimiter) Len() int {
	n := 0
	for i := range l.parts {
		l.parts[i].mu.Lock()
		n += len(l.parts[i].m)
		l.parts[i].mu.Unlock()
	}
	return n
}

// Wrap limits every request but /healthz: over the limit it answers 429
// too_many_requests with Retry-After (whole seconds), as the /v1 envelope
// or an RFC 7807 problem. A nil limiter returns next.
func (l *RateLimiter) Wrap(next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		ok, wait := l.Allow(callerKey(r))
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		secs := max(1, int64(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		guardError{http.StatusTooManyRequests, httpx.V1TooManyRequests, baton.ECodeTooManyRequests,
			"rate limit exceeded; retry after " + strconv.FormatInt(secs, 10) + " s"}.write(w, r)
	})
}

// callerKey names whom a request is counted against: its bearer token's
// digest, else its remote IP.
func callerKey(r *http.Request) string {
	if token, err := httpx.Bearer(r); err == nil {
		sum := sha256.Sum256([]byte(token))
		return "t" + string(sum[:])
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "a" + host
}
