package hub

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ev(session string, seq int64) baton.Notice {
	return baton.Notice{Event: &baton.Event{SessionID: session, Seq: seq}}
}

func drain(s baton.Subscription) []int64 {
	var out []int64
	for n := range s.C() {
		out = append(out, n.Event.Seq)
	}
	return out
}

func TestOrderAndIsolation(t *testing.T) {
	h := New(16)
	a := h.Subscribe("a", baton.SubObserver)
	b := h.Subscribe("b", baton.SubObserver)
	h.Publish(ev("a", 1), ev("b", 1), ev("a", 2), ev("a", 3))
	h.End("a", "")
	h.End("b", "")
	if got := fmt.Sprint(drain(a)); got != "[1 2 3]" {
		t.Fatalf("a got %s", got)
	}
	if got := fmt.Sprint(drain(b)); got != "[1]" {
		t.Fatalf("b got %s", got)
	}
	if a.Err() != nil {
		t.Fatalf("normal end has err %v", a.Err())
	}
}

func TestLaggedSubscriberEndsAlone(t *testing.T) {
	h := New(2)
	slow := h.Subscribe("s", baton.SubObserver)
	fast := h.Subscribe("s", baton.SubTurn)
	for i := int64(1); i <= 3; i++ {
		h.Publish(ev("s", i))
		if n := <-fast.C(); n.Event.Seq != i { // fast keeps up
			t.Fatalf("fast got %d, want %d", n.Event.Seq, i)
		}
	}
	if seqs := drain(slow); fmt.Sprint(seqs) != "[1 2]" {
		t.Fatalf("slow got %v", seqs)
	}
	if !errors.Is(slow.Err(), baton.ErrLagged) {
		t.Fatalf("slow err = %v, want lagged", slow.Err())
	}
	h.End("s", "")
	if _, ok := <-fast.C(); ok || fast.Err() != nil {
		t.Fatalf("fast did not end normally: err %v", fast.Err())
	}
}

func TestEndByKind(t *testing.T) {
	h := New(4)
	obs := h.Subscribe("s", baton.SubObserver)
	turn := h.Subscribe("s", baton.SubTurn)
	h.End("s", baton.SubObserver)
	if _, ok := <-obs.C(); ok {
		t.Fatal("observer still open after End(observer)")
	}
	h.Publish(ev("s", 1))
	if n := <-turn.C(); n.Event.Seq != 1 {
		t.Fatalf("turn stream got %v", n)
	}
	turn.Close()
	turn.Close() // idempotent
	if _, ok := <-turn.C(); ok {
		t.Fatal("closed subscription still delivers")
	}
	h.Publish(ev("s", 2)) // no subscribers left: must not panic
}

// TestConcurrentPublishSubscribe: subscriptions come and go while others
// publish; each sees its own publication unless it lagged behind the
// others', ends on Close, and the hub forgets it.
func TestConcurrentPublishSubscribe(t *testing.T) {
	h := New(DefaultBuffer)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				s := h.Subscribe("x", baton.SubObserver)
				h.Publish(ev("x", int64(j)))
				got := false
				for len(s.C()) > 0 && !got {
					got = (<-s.C()).Event.Seq == int64(j)
				}
				s.Close()
				_, open := <-drainAll(s)
				lagged := errors.Is(s.Err(), baton.ErrLagged)
				if open || (s.Err() != nil && !lagged) || (!got && !lagged) {
					errs <- fmt.Errorf("round %d: saw own event %v, err %v", j, got, s.Err())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(h.shard[h.shardOf("x")].subs["x"]); n != 0 {
		t.Fatalf("%d subscriptions left behind", n)
	}
}

// drainAll empties a closed subscription and returns its channel.
func drainAll(s baton.Subscription) <-chan baton.Notice {
	for range s.C() {
	}
	return s.C()
}

// BenchmarkFanout1000 publishes one event to 1,000 subscribers of one
// session, each drained by its own goroutine.
func BenchmarkFanout1000(b *testing.B) {
	b.ReportAllocs()
	h := New(DefaultBuffer)
	const n = 1000
	var wg sync.WaitGroup
	subs := make([]baton.Subscription, n)
	for i := range subs {
		subs[i] = h.Subscribe("s", baton.SubObserver)
		wg.Add(1)
		go func(s baton.Subscription) {
			defer wg.Done()
			for range s.C() {
			}
		}(subs[i])
	}
	e := ev("s", 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.Publish(e)
	}
	b.StopTimer()
	h.End("s", "")
	wg.Wait()
}

func TestFail(t *testing.T) {
	h := New(4)
	moved := errors.New("moved")
	a1, a2 := h.Subscribe("a", baton.SubObserver), h.Subscribe("a", baton.SubTurn)
	b := h.Subscribe("b", baton.SubObserver)
	h.Fail("a", moved)
	for _, s := range []baton.Subscription{a1, a2} {
		if _, ok := <-s.C(); ok || !errors.Is(s.Err(), moved) {
			t.Fatalf("a's subscription after Fail(a): open %v, err %v", ok, s.Err())
		}
	}
	h.Publish(ev("b", 1))
	if n := <-b.C(); n.Event.Seq != 1 {
		t.Fatalf("b got %v after a failed", n)
	}
	c := h.Subscribe("c", baton.SubObserver)
	down := errors.New("shutting down")
	h.Fail("", down)
	for _, s := range []baton.Subscription{b, c} {
		if _, ok := <-s.C(); ok || !errors.Is(s.Err(), down) {
			t.Fatalf("subscription after Fail(all): open %v, err %v", ok, s.Err())
		}
	}
	h.Publish(ev("b", 2)) // nobody left: must not block or panic
	b.Close()             // closing an ended subscription is harmless
}

func TestRing(t *testing.T) {
	h := New(2)
	obs, turn := h.Subscribe("s", baton.SubObserver), h.Subscribe("s", baton.SubTurn)
	other := h.Subscribe("t", baton.SubObserver)
	if got := fmt.Sprint(sortedStrings(h.Observed())); got != "[s t]" {
		t.Fatalf("Observed = %s", got)
	}
	h.Ring("s", 7)
	if n := <-obs.C(); n.Ring == nil || n.Ring.SessionID != "s" || n.Ring.Seq != 7 {
		t.Fatalf("observer got %+v, want the ring", n)
	}
	select {
	case n := <-turn.C():
		t.Fatalf("a turn stream got %+v; rings are for observers only", n)
	case n := <-other.C():
		t.Fatalf("another session's observer got %+v", n)
	default:
	}
	for range 3 { // past the buffer of 2: lagged, as for events
		h.Ring("s", 8)
	}
	for range obs.C() {
	}
	if !errors.Is(obs.Err(), baton.ErrLagged) {
		t.Fatalf("a full observer: err %v, want lagged", obs.Err())
	}
	turn.Close()
	other.Close()
	if got := h.Observed(); len(got) != 0 {
		t.Fatalf("Observed after every observer ended = %v", got)
	}
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
