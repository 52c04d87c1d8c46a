package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-engine/baton"
)

// benchDialects runs fn on SQLite, and on PostgreSQL when the DSN is set.
func benchDialects(b *testing.B, fn func(b *testing.B, db *DB)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, openSQLite(b)) })
	if os.Getenv(pgEnv) != "" {
		b.Run("postgres", func(b *testing.B) { fn(b, openPostgres(b)) })
		// Cluster mode: every append fenced by its lease, every commit
		// notifying; and fenced without the notify, to tell the two apart.
		b.Run("postgres-cluster", func(b *testing.B) { fn(b, openPostgresNode(b)) })
		b.Run("postgres-fenced", func(b *testing.B) {
			db := openPostgresNode(b)
			db.w.notify = ""
			fn(b, db)
		})
	}
}

// openPostgresNode opens a store in cluster mode in a fresh schema;
// sessions it creates are its own.
func openPostgresNode(b *testing.B) *DB {
	db, err := Open(context.Background(), Options{URL: pgSchemaURL(b), NodeID: "bench", LeaseTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func benchSessions(b *testing.B, db *DB, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		s := &baton.Session{ClientKeyID: "key_bench", ProfileID: "pro_bench"}
		if err := db.CreateSession(context.Background(), s, nil); err != nil {
			b.Fatal(err)
		}
		ids[i] = s.ID
	}
	return ids
}

var benchPayload = map[string]any{"role": "assistant", "content": []map[string]string{{"type": "text", "text": "hello from the benchmark"}}}

// BenchmarkAppendSequential appends one event per call to one session: the
// latency of a lone commit (one fsync per event on SQLite).
func BenchmarkAppendSequential(b *testing.B) {
	benchDialects(b, func(b *testing.B, db *DB) {
		sid := benchSessions(b, db, 1)[0]
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := db.Append(ctx, baton.NewEvent(sid, "", "bench", benchPayload)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkAppendConcurrent100 appends from 100 goroutines, one session
// each: group commit shares one transaction and fsync among them.
func BenchmarkAppendConcurrent100(b *testing.B) {
	benchDialects(b, func(b *testing.B, db *DB) {
		const writers = 100
		ids := benchSessions(b, db, writers)
		ctx := context.Background()
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ReportAllocs()
		before := db.w.batches.Load()
		b.ResetTimer()
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if err := db.Append(ctx, baton.NewEvent(ids[i], "", "bench", benchPayload)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(b.N)/float64(max(1, db.w.batches.Load()-before)), "events/commit")
	})
}

// mixPayloads are event payloads shaped like a client-tool round trip's:
// small ones of 80–400 bytes, and provider requests that carry the whole
// conversation so far, 1–8 KiB.
type mixPayloads struct {
	small    []json.RawMessage
	requests []json.RawMessage
}

func newMixPayloads() mixPayloads {
	var m mixPayloads
	for i := range 8 {
		text := strings.Repeat("tool output line ", (40+i*40)/17)
		m.small = append(m.small, baton.MarshalJSON(map[string]any{"call_id": "call_0123456789abcdef", "content": text}))
	}
	for i := range 8 {
		var msgs []map[string]string
		for len(baton.MarshalJSON(msgs)) < (i+1)*1024 {
			msgs = append(msgs, map[string]string{"role": "user", "content": strings.Repeat("conversation so far ", 6)})
		}
		m.requests = append(m.requests, baton.MarshalJSON(map[string]any{"model": "bench-model", "messages": msgs}))
	}
	return m
}

// roundTripGroups is how a round trip's ten events reach Append: a turn
// commits some events together (held ones with the next), others alone.
var roundTripGroups = []int{2, 1, 3, 1, 2, 1}

// cpuTime returns the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppendMix100 appends from 100 sessions at once with a round
// trip's mix of payloads (one event in five a 1–8 KiB provider request),
// in the groups a turn commits them in; one op is one event. cpu-µs/event
// is the whole process's CPU time (writer, checkpointer and the callers)
// per event.
func BenchmarkAppendMix100(b *testing.B) { benchAppendMix(b, 100, false) }

// BenchmarkAppendMix16 is BenchmarkAppendMix100 with 16 sessions: commits
// of about a dozen events, where the cost of each commit weighs more.
func BenchmarkAppendMix16(b *testing.B) { benchAppendMix(b, 16, false) }

// BenchmarkAppendMixGrowing100 is BenchmarkAppendMix100 with provider
// requests shaped like a real conversation's: each session's next request
// repeats the previous one's messages plus one new message, followed by
// the same tools, and the conversation restarts after growConversation
// round trips.
func BenchmarkAppendMixGrowing100(b *testing.B) { benchAppendMix(b, 100, true) }

// growConversation is how many round trips a growing benchmark
// conversation lasts (about 30 KiB of messages) before it restarts.
const growConversation = 48

// conversation builds one session's growing provider requests, shaped
// like the engine's.
type conversation struct {
	session string
	note    string // each message's text after its header; a default when empty
	msgs    []byte // the messages array so far, without its closing bracket
	n       int
}

var benchTools = baton.MarshalJSON([]map[string]string{
	{"name": "read_file", "description": strings.Repeat("Reads a file of the workspace. ", 20)},
	{"name": "run", "description": strings.Repeat("Runs a command in the sandbox. ", 20)},
	{"name": "search", "description": strings.Repeat("Searches the workspace. ", 20)},
})

// next returns the conversation's next provider request payload.
func (c *conversation) next() json.RawMessage {
	if c.n%growConversation == 0 {
		c.msgs = append(c.msgs[:0], '[')
	} else {
		c.msgs = append(c.msgs, ',')
	}
	c.n++
	note := c.note
	if note == "" {
		note = strings.Repeat("the agent said something new ", 20)
	}
	text := fmt.Sprintf("round trip %d of %s: %s", c.n, c.session, note)
	c.msgs = append(c.msgs, baton.MarshalJSON(map[string]string{"role": "user", "content": text})...)
	b := make([]byte, 0, len(c.msgs)+len(benchTools)+160)
	b = append(b, `{"attempt":0,"base_url":"https://api.example.com","kind":"messages","max_tokens":4096,"messages":`...)
	b = append(b, c.msgs...)
	b = append(b, `],"model":"bench-model","provider":"bench","tools":`...)
	b = append(b, benchTools...)
	return append(b, '}')
}

func benchAppendMix(b *testing.B, writers int, grow bool) {
	benchDialects(b, func(b *testing.B, db *DB) {
		ids := benchSessions(b, db, writers)
		mix := newMixPayloads()
		ctx := context.Background()
		var next, logical atomic.Int64
		var wg sync.WaitGroup
		b.ReportAllocs()
		before := db.w.batches.Load()
		b.ResetTimer()
		cpu := cpuTime(b)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := i // this session's event counter, staggered
				conv := &conversation{session: ids[i]}
				var sent int64
				defer func() { logical.Add(sent) }()
				for g := 0; ; g++ {
					n := int64(roundTripGroups[g%len(roundTripGroups)])
					end := next.Add(n)
					n = min(n, int64(b.N)-(end-n))
					if n <= 0 {
						return
					}
					evs := make([]*baton.Event, n)
					for j := range evs {
						e := &baton.Event{SessionID: ids[i], Type: "turn.output", Payload: mix.small[k%len(mix.small)]}
						if k%5 == 0 {
							e.Type, e.Payload = baton.EventProviderReq, mix.requests[k/5%len(mix.requests)]
							if grow {
								e.Payload = conv.next()
							}
						}
						sent += int64(len(e.Payload))
						evs[j] = e
						k++
					}
					if err := db.Append(ctx, evs...); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		used := cpuTime(b) - cpu
		b.StopTimer()
		b.ReportMetric(float64(used.Nanoseconds())/1e3/float64(b.N), "cpu-µs/event")
		b.ReportMetric(float64(b.N)/float64(max(1, db.w.batches.Load()-before)), "events/commit")
		var stored int64
		if err := db.read.QueryRow(`SELECT COALESCE(SUM(LENGTH(payload)), 0) FROM session_events`).Scan(&stored); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(logical.Load())/float64(b.N), "payload-B/event")
		b.ReportMetric(float64(stored)/float64(b.N), "stored-B/event")
	})
}
