package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/wire"
)

// DefaultMaxRPC is the default size limit of one /rpc request: 8 MiB.
const DefaultMaxRPC = 8 << 20

// rpc serves POST /api/v1/sessions/{id}/rpc: one JSON-RPC request in, an
// NDJSON stream out (BAE's client API). After authentication the status is
// always 200 and every outcome is a frame.
func (s *Server) rpc(w http.ResponseWriter, r *http.Request) {
	key, err := s.sessionKey(r, r.PathValue("id"))
	if err != nil {
		httpx.WriteError(w, r, s.log, err)
		return
	}
	limit := s.maxRPC()
	out := newStream(w, &s.bufs, s.opts.WriteTimeout)
	defer out.release()
	defer out.start() // a notification with no output still gets its 200
	c := &call{s: s, key: key, out: out, ctx: r.Context()}
	if c.held = s.charge(r); !s.inflight.take(c.held) {
		out.frame(wire.ErrorFrame(nil, c.rpcError(s.inflight.refusal())))
		return
	}
	defer func() { s.inflight.give(c.held) }() // sendMessage hands it to the turn
	body, err := readBody(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			out.frame(wire.ErrorFrame(nil, &wire.Error{Code: wire.CodeInvalidRequest, Message: "Invalid Request: request body is too large"}))
		case errors.Is(err, os.ErrDeadlineExceeded):
			out.frame(wire.ErrorFrame(nil, &wire.Error{Code: wire.CodeInvalidRequest, Message: "Invalid Request: timed out reading the request body"}))
		}
		return
	}
	req, perr := wire.Parse(body)
	switch {
	case perr != nil && req == nil:
		out.frame(wire.ErrorFrame(nil, perr))
		return
	case perr != nil:
		if !req.Notification() {
			out.frame(wire.ErrorFrame(req.ID, perr))
		}
		return
	}
	c.req = req
	switch req.Method {
	case "session.registerDriver":
		c.reply(map[string]bool{"registered": true}, s.opts.Turns.RegisterDriver(c.ctx, key))
	case "session.sendMessage":
		c.sendMessage()
	case "session.subscribe":
		c.subscribe()
	case "session.unsubscribe":
		c.reply(map[string]bool{"unsubscribed": true}, s.opts.Turns.Unsubscribe(c.ctx, key))
	case "session.updateClientTools":
		c.reply(map[string]bool{"updated": true}, s.opts.Turns.UpdateClientTools(c.ctx, key, wire.Param(req.Params, "tools")))
	case "session.cancelTurn":
		c.reply(map[string]bool{"cancelled": true}, s.opts.Turns.CancelTurn(c.ctx, key))
	case "session.startRemoteSandbox":
		c.reply(s.opts.Sandboxes.StartRemoteSandbox(c.ctx, key, req.Params))
	case "session.stopRemoteSandbox":
		c.reply(s.opts.Sandboxes.StopRemoteSandbox(c.ctx, key))
	case "session.execRemoteSandbox":
		c.reply(s.opts.Sandboxes.ExecRemoteSandbox(c.ctx, key, req.Params))
	case "session.reportLocalSandbox":
		c.reply(map[string]bool{"reported": true}, s.opts.Sandboxes.ReportLocalSandbox(c.ctx, key, req.Params))
	case "session.reportLocalSubagent":
		c.reply(map[string]bool{"reported": true}, s.opts.Sandboxes.ReportLocalSubagent(c.ctx, key, req.Params))
	case "session.cancelSubagent":
		c.reply(s.opts.Sandboxes.CancelSubagent(c.ctx, key, req.Params))
	case "session.respondInteraction": // Baton: answers an executor brain's interaction
		if is, ok := s.opts.Turns.(baton.InteractionService); ok {
			c.reply(is.RespondInteraction(c.ctx, key, req.Params))
			break
		}
		c.fail(&wire.Error{Code: wire.CodeMethodNotFound, Message: "Method not found: " + req.Method})
	default:
		c.fail(&wire.Error{Code: wire.CodeMethodNotFound, Message: "Method not found: " + req.Method})
	}
}

// readBody reads a request body of the declared length (-1: unknown) in
// one allocation when the length is declared and within limit; io.ReadAll
// would grow its buffer by doubling, copying a large message several
// times.
func readBody(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared <= 0 || declared > limit {
		return io.ReadAll(r)
	}
	b := make([]byte, declared) // net/http ends the body at its declared length
	n, err := io.ReadFull(r, b) // a short body fails as it does for io.ReadAll
	return b[:n], err
}

// call is one JSON-RPC request being answered.
type call struct {
	s   *Server
	key *baton.Key
	req *wire.Request
	out *stream
	ctx context.Context
	// held is what the request counts against the in-flight budget.
	held int64
}

// reply writes the terminal frame for a single-response method: the result,
// or the error err maps to. Notifications get no terminal frame.
func (c *call) reply(result any, err error) {
	if err != nil {
		c.fail(c.rpcError(err))
		return
	}
	if c.req.Notification() {
		return
	}
	b, err := wire.Result(c.req.ID, result)
	if err != nil {
		c.fail(c.rpcError(err))
		return
	}
	c.out.frame(b)
}

// fail writes an error frame unless the request is a notification.
func (c *call) fail(e *wire.Error) {
	if !c.req.Notification() {
		c.out.frame(wire.ErrorFrame(c.req.ID, e))
	}
}

// rpcError maps err through the transport's table, logging internal
// errors with the request id.
func (c *call) rpcError(err error) *wire.Error {
	if baton.ErrorCode(err) == baton.ECodeInternal {
		c.s.log.Error("rpc failed", "method", c.req.Method, "request_id", httpx.RequestID(c.ctx), "err", err)
	}
	return wire.FromError(err)
}

// sendMessage streams the turn's live events (minus the caller's own
// message) and then the terminal {message, events}. The turn belongs to the
// session: if the client goes away, the turn goes on without it.
func (c *call) sendMessage() {
	var deltas bool
	_ = json.Unmarshal(wire.Param(c.req.Params, "stream_deltas"), &deltas)
	if !c.frameLimit(wire.Param(c.req.Params, "max_frame_bytes")) {
		return
	}
	turn, err := c.s.opts.Turns.SendMessage(c.ctx, c.key, wire.Param(c.req.Params, "message"), baton.SendOptions{StreamDeltas: deltas})
	if err != nil {
		c.fail(c.rpcError(err))
		return
	}
	// The engine keeps what it needs of the message; the request body,
	// which may be megabytes, need not live as long as the turn. Its
	// bytes stay charged to the budget until the turn ends, whether or
	// not this stream lasts that long.
	c.req = &wire.Request{ID: bytes.Clone(c.req.ID), Method: c.req.Method}
	held, budget := c.held, c.s.inflight
	c.held = 0
	defer func() {
		select {
		case <-turn.Done: // the usual case: given back before the response ends
			budget.give(held)
		default: // the client left (or the turn was never started): the turn still holds the message
			go func() {
				<-turn.Done
				budget.give(held)
			}()
		}
	}()
	if turn.Queued {
		c.out.start() // the headers go out at once; a turn about to start sends them with its first events
	}
	select {
	case <-turn.Started:
	case <-c.ctx.Done():
		return
	}
	sub := turn.Sub()
	if sub != nil {
		defer sub.Close()
		if !c.forward(sub, turn, deltas) {
			return
		}
	} else {
		<-turn.Done
	}
	res := turn.Result()
	if res.Err != nil {
		c.fail(c.rpcError(res.Err))
		return
	}
	if !c.req.Notification() { // the events carry whole provider requests: write them through, don't re-encode
		c.out.result(c.req.ID, res.Message, res.Events)
	}
	c.out.end()
}

// forward relays the caller's feed until the turn is done. Notices that
// are already queued go out together in one write, and once the turn's
// final server.message.send is queued nothing more is flushed: the result
// follows at once and leaves in the same write. It returns false when the
// stream ended early (client gone, lagged); what it queued last is left
// for the caller to write with the result.
func (c *call) forward(sub baton.Subscription, turn *baton.Turn, deltas bool) bool {
	feed := sub.C()
	final := false // the turn's reply is queued: hold everything for the result
	queue := func(n baton.Notice) bool {
		if final {
			// server.message.send is the last event of a server turn: what
			// follows it in the feed is the next turn's (the queue's next
			// message starts as soon as this one ends).
			return true
		}
		final = n.Event != nil && n.Event.Type == baton.EventServerMessage
		return c.notice(n, turn.Own, deltas)
	}
	// drain queues every notice already waiting; false: the feed ended.
	drain := func() (open, ok bool) {
		for {
			select {
			case n, more := <-feed:
				if !more {
					return false, true
				}
				if !queue(n) {
					return true, false
				}
			default:
				return true, true
			}
		}
	}
	for {
		select {
		case n, ok := <-feed:
			if !ok {
				if errors.Is(sub.Err(), baton.ErrLagged) {
					c.out.frame(wire.Lagged())
					return false
				}
				feed = nil // session closed: wait for the turn's end
				continue
			}
			if !queue(n) {
				return false
			}
			open, ok := drain()
			if !ok || !final && !c.out.flush() {
				return false
			}
			if !open {
				feed = nil
			}
		case <-turn.Done:
			// Everything the turn committed is already queued.
			_, ok := drain()
			return ok
		case <-c.ctx.Done():
			return false
		}
	}
}

// frameLimit applies the optional max_frame_bytes parameter (Baton): a
// client's bound on one frame, which the stream keeps by leaving out the
// largest event payloads of a frame that would pass it. Anything but a
// non-negative integer is refused.
func (c *call) frameLimit(raw json.RawMessage) bool {
	if raw == nil || string(raw) == "null" {
		return true
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil || n < 0 {
		c.fail(&wire.Error{Code: wire.CodeInvalidParams, Message: `Invalid params: "max_frame_bytes" must be a non-negative integer`})
		return false
	}
	c.out.maxFrame = int(min(n, math.MaxInt32))
	return true
}

// notice queues one live notice; skip filters the caller's own events.
func (c *call) notice(n baton.Notice, skip func(*baton.Event) bool, deltas bool) bool {
	switch {
	case n.Event != nil:
		if skip != nil && skip(n.Event) {
			return true
		}
		c.out.add(n.Event)
	case n.Delta != nil && deltas:
		b, err := wire.DeltaNotification(n.Delta)
		if err != nil {
			return false
		}
		c.out.addFrame(b)
	}
	return true
}

// subscribe streams a replay and then live events until the feed ends;
// Baton then writes a terminal result saying why (BAE never ends it).
func (c *call) subscribe() {
	var p struct {
		Since  *string `json:"since_event_id"`
		Deltas bool    `json:"stream_deltas"`
	}
	_ = json.Unmarshal(c.req.Params, &p)
	if !c.frameLimit(wire.Param(c.req.Params, "max_frame_bytes")) {
		return
	}
	since := ""
	if p.Since != nil {
		since = *p.Since
	}
	feed, err := c.s.opts.Turns.Subscribe(c.ctx, c.key, since, p.Deltas)
	if err != nil {
		c.fail(c.rpcError(err))
		return
	}
	defer feed.Close()
	// Headers go out only now that the feed is attached, so a client that
	// sees the response can rely on every later event reaching it.
	c.out.start()
	for {
		n, err := feed.Next(c.ctx)
		switch {
		case errors.Is(err, baton.ErrLagged):
			c.out.frame(wire.Lagged())
			return
		case c.ctx.Err() != nil:
			return
		case err != nil:
			c.out.frame(wire.ErrorFrame(nil, c.rpcError(err)))
			return
		case n == nil:
			reason := "unsubscribed"
			if feed.Closed() {
				reason = "session_closed"
			}
			c.reply(map[string]any{"ended": true, "reason": reason}, nil)
			return
		}
		if !c.notice(*n, nil, p.Deltas) {
			return
		}
		// What is ready already (the rest of a replay chunk, a commit's
		// other events) goes out in the same write.
		for feed.Poll != nil && len(c.out.buf) < maxBatch {
			n, ok := feed.Poll()
			if !ok {
				break
			}
			if !c.notice(*n, nil, p.Deltas) {
				return
			}
		}
		if !c.out.flush() {
			return
		}
	}
}

// maxBatch bounds how much a subscribe stream queues before a write.
const maxBatch = 64 << 10

// stream writes NDJSON frames, flushing each batch of notices, and remembers a failed write
// so the handler stops at the first one.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration // deadline of each write
	buf     []byte
	pool    *bufPool
	started bool
	failed  bool
	// maxFrame is the client's max_frame_bytes, 0 for none.
	maxFrame int
}

func newStream(w http.ResponseWriter, pool *bufPool, timeout time.Duration) *stream {
	if timeout <= 0 {
		timeout = httpx.DefaultWriteTimeout
	}
	return &stream{w: w, rc: http.NewResponseController(w), timeout: timeout, buf: pool.get(), pool: pool}
}

// deadline gives the next write (and its flush, or net/http's final one)
// the stream's timeout, so a client that stops reading fails the write
// instead of blocking the handler, and with it the subscription, forever.
// net/http lifts it once the response is done. A writer without
// deadlines (a test recorder) writes without one.
func (s *stream) deadline() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) }

// bufPool recycles stream buffers: a turn's result repeats its events,
// provider requests and their history included, so a buffer grows to tens
// of KiB on every sendMessage. A nil *bufPool allocates.
type bufPool struct{ p sync.Pool }

// maxPooled bounds the buffers kept for reuse.
const maxPooled = 1 << 20

func (bp *bufPool) get() []byte {
	if bp != nil {
		if b, ok := bp.p.Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, 4<<10)
}

func (bp *bufPool) put(b []byte) {
	if bp != nil && cap(b) <= maxPooled {
		b = b[:0]
		bp.p.Put(&b)
	}
}

// release hands the buffer back once nothing more is written.
func (s *stream) release() {
	s.pool.put(s.buf)
	s.buf = nil
}

// start sends the 200 and the NDJSON headers, once.
func (s *stream) start() {
	if s.started {
		return
	}
	s.header()
	s.deadline()
	if s.rc.Flush() != nil {
		s.failed = true
	}
}

// header writes the 200 and the NDJSON headers without flushing them, so
// that they leave with the first frames.
func (s *stream) header() {
	if s.started {
		return
	}
	s.started = true
	s.w.Header().Set("Content-Type", "application/x-ndjson")
	s.w.Header().Set("Cache-Control", "no-store")
	s.w.WriteHeader(http.StatusOK)
}

// frame queues a last frame and writes everything queued without a
// flush: the response ends next, and net/http then sends it together with
// the end of the chunked body in one write.
func (s *stream) frame(b []byte) {
	s.addFrame(b)
	s.end()
}

// end writes what is queued without flushing it; see frame.
func (s *stream) end() {
	if s.failed {
		return
	}
	s.header()
	s.deadline()
	if _, err := s.w.Write(s.buf); err != nil {
		s.failed = true
	}
	s.buf = s.buf[:0]
}

// addFrame queues one frame and a newline.
func (s *stream) addFrame(b []byte) { s.buf = append(append(s.buf, b...), '\n') }

// spillAt is the length from which a value of a frame (an event's
// payload, a message's content) is written through as it is instead of
// being copied into the stream's buffer: a turn's result repeats its
// events, whole provider requests included, and a frame built in one
// buffer would hold all of them again.
const spillAt = 64 << 10

// put queues raw as part of the frame being built. A large value is
// written after what is queued, without a copy, and not flushed.
func (s *stream) put(raw []byte) {
	if len(raw) < spillAt {
		s.buf = append(s.buf, raw...)
		return
	}
	s.end() // what is queued goes first, under the same write deadline
	if s.failed {
		return
	}
	if _, err := s.w.Write(raw); err != nil {
		s.failed = true
	}
}

// add queues a session.event notification, encoded without intermediate
// values; a payload that would take the frame over the client's
// max_frame_bytes is left out.
func (s *stream) add(ev *baton.Event) {
	s.buf = append(s.buf, wire.NotificationHead...)
	omit := s.maxFrame > 0 && len(wire.NotificationHead)+2+wire.EventViewSize(ev)+len(ev.Payload) > s.maxFrame
	s.event(ev, omit)
	s.buf = append(s.buf, "}\n"...)
}

// event queues ev's EventView, with its payload or, when omit is set, the
// stand-in that gives the payload's size.
func (s *stream) event(ev *baton.Event, omit bool) {
	s.buf = wire.AppendEventHead(s.buf, ev)
	if omit {
		s.buf = wire.AppendOmitted(s.buf, len(ev.Payload))
	} else {
		s.put(wire.EventPayload(ev))
	}
	s.buf = wire.AppendEventTail(s.buf, ev)
}

// result queues the terminal frame of a sendMessage,
// {"jsonrpc":"2.0","id":…,"result":{"message":…,"events":[…]}}, written
// in parts as wire.AppendTurnResult would build it.
func (s *stream) result(id json.RawMessage, msg baton.Message, events []*baton.Event) {
	omit := omitted(s.maxFrame, id, msg, events)
	s.buf = wire.AppendTurnResultHead(s.buf, id, msg)
	s.put(wire.MessageContent(msg))
	s.buf = append(s.buf, wire.TurnResultEvents...)
	for i, ev := range events {
		if i > 0 {
			s.buf = append(s.buf, ',')
		}
		s.event(ev, omit[ev])
	}
	s.buf = append(s.buf, wire.TurnResultTail+"\n"...)
}

// omitted chooses the event payloads a terminal frame leaves out to stay
// under max bytes (0: no bound): the largest first, until the rest fits.
// The message itself is never left out.
func omitted(max int, id json.RawMessage, msg baton.Message, events []*baton.Event) map[*baton.Event]bool {
	if max <= 0 {
		return nil
	}
	size := 128 + len(id) + 2*len(msg.Role) + len(msg.Content)
	for _, ev := range events {
		size += wire.EventViewSize(ev) + len(ev.Payload) + 1
	}
	if size <= max {
		return nil
	}
	bySize := slices.Clone(events)
	slices.SortStableFunc(bySize, func(a, b *baton.Event) int { return cmp.Compare(len(b.Payload), len(a.Payload)) })
	omit := map[*baton.Event]bool{}
	for _, ev := range bySize {
		if size <= max || len(ev.Payload) <= stubSize {
			break
		}
		omit[ev] = true
		size -= len(ev.Payload) - stubSize
	}
	return omit
}

// stubSize bounds the length of wire.AppendOmitted's stand-in.
const stubSize = 40

// flush writes what is queued (after the headers, if they are still
// unsent), in one write and one flush.
func (s *stream) flush() bool {
	if s.failed {
		return false
	}
	if len(s.buf) == 0 {
		return true // e.g. only the caller's own events, which it skips
	}
	s.header()
	s.deadline()
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	if err != nil {
		s.failed = true
		return false
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
	return !s.failed
}
