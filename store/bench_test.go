package store

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/baton-engine/baton"
)

// benchDialects runs fn on SQLite, and on PostgreSQL when the DSN is set.
func benchDialects(b *testing.B, fn func(b *testing.B, db *DB)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, openSQLite(b)) })
	if os.Getenv(pgEnv) != "" {
		b.Run("postgres", func(b *testing.B) { fn(b, openPostgres(b)) })
	}
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
