// Package peer runs the harness's side of one executor connection: a
// bidirectional JSON-RPC 2.0 conversation in the frames of package proto
// over a github.com/coder/websocket connection, with a reader goroutine,
// outgoing requests correlated by id and incoming requests dispatched to
// a Handler. FromError is the executor transport's one table from Baton
// error codes to the protocol's JSON-RPC codes.
//
// It is apart from package proto because proto is shared with the
// executor SDK and imports only the standard library, while a peer needs
// the WebSocket library and the root package's errors; it is apart from
// package executor so that the connection mechanics stay small and are
// tested on their own, without sessions or leases.
package peer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton/executor/proto"
)

// ErrClosed is returned by Call and Notify once the connection is closed
// or closing; the error also wraps the reason.
var ErrClosed = errors.New("executor connection closed")

// errKilled is the reason of a connection ended by Kill.
var errKilled = errors.New("connection killed")

// Handler serves incoming requests and notifications. It runs on the
// peer's reader goroutine, one frame at a time and in order, so it must
// not wait on this peer (no Call from inside it): start a goroutine for
// that. A request's answer is the returned result, or the error mapped by
// FromError; a notification's return values are only logged. A *Reply
// result also runs code once the answer is written.
type Handler func(ctx context.Context, f *proto.Frame) (any, error)

// Reply is a handler result that runs After on the reader goroutine once
// the answer (Result, or Err when set) has been written. After must not
// block; it may Close the peer.
type Reply struct {
	Result any
	Err    error
	After  func()
}

// Options configures a Peer.
type Options struct {
	Handler      Handler       // nil answers every request -32601
	Logger       *slog.Logger  // nil discards
	WriteTimeout time.Duration // per message; default 10s
	ReadLimit    int64         // bytes per incoming message; default proto.MaxMessage
	// NetConn is the network connection under the WebSocket (see Accept).
	// Kill closes it, which cuts a close handshake short; without it Kill
	// may wait for a started handshake to time out (about 10s).
	NetConn net.Conn
	// OnClose is called once, on the reader goroutine, when the connection
	// has ended and before Done is closed, with the reason (see Err).
	OnClose func(err error)
	// Invalid, when set, decides what becomes of an incoming message the
	// handler never sees: one that is not JSON (e is -32700), not a valid
	// JSON-RPC 2.0 object or a binary message (e is -32600, answered with
	// the message's id when it has one), or a response to no pending
	// request (e is nil: by default nothing is sent, since its id is the
	// other side's). Returning nil keeps the default; a *Reply sends
	// Reply.Err instead (nothing when nil; a response's answer has id
	// null) and then runs After. It runs on the reader goroutine and must
	// not block.
	Invalid func(e *proto.Error) *Reply
}

// Peer is one bidirectional JSON-RPC 2.0 connection over a WebSocket: a
// reader goroutine dispatching incoming frames, outgoing requests matched
// to their responses by id. Writes are whole messages, serialised by the
// websocket connection. All methods are safe for concurrent use.
type Peer struct {
	conn         *websocket.Conn
	netConn      net.Conn
	handler      Handler
	log          *slog.Logger
	writeTimeout time.Duration
	readLimit    int64
	onClose      func(error)
	invalid      func(*proto.Error) *Reply

	// ctx bounds every read and write; canceling it (Kill, or the end of
	// the reader) tears the socket down.
	ctx    context.Context
	cancel context.CancelFunc
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[string]chan *proto.Frame
	err     error // why the connection ended; set once

	closeOnce sync.Once
	closing   chan struct{} // closed when closing starts
	closer    chan struct{} // closed when the close handshake is over
	done      chan struct{} // closed when everything is over
}

// New returns a peer for conn, which it owns from now on: its read
// limit becomes opts.ReadLimit (MaxMessage by default). Start begins
// serving; Close or Kill (or the remote end) ends it.
func New(conn *websocket.Conn, opts Options) *Peer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Peer{
		conn:         conn,
		netConn:      opts.NetConn,
		handler:      opts.Handler,
		log:          opts.Logger,
		writeTimeout: opts.WriteTimeout,
		readLimit:    opts.ReadLimit,
		onClose:      opts.OnClose,
		invalid:      opts.Invalid,
		ctx:          ctx,
		cancel:       cancel,
		pending:      make(map[string]chan *proto.Frame),
		closing:      make(chan struct{}),
		closer:       make(chan struct{}),
		done:         make(chan struct{}),
	}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.writeTimeout <= 0 {
		p.writeTimeout = 10 * time.Second
	}
	if p.readLimit <= 0 {
		p.readLimit = proto.MaxMessage
	}
	conn.SetReadLimit(p.readLimit)
	return p
}

// Start starts the reader goroutine. Call it once, after whatever the
// handler needs is in place.
func (p *Peer) Start() { go p.read() }

// Subprotocol returns the negotiated subprotocol.
func (p *Peer) Subprotocol() string { return p.conn.Subprotocol() }

// Done is closed when the connection has ended and OnClose has returned.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Err returns why the connection ended (nil while it is open): a
// websocket.CloseError with the code sent by Close, or the read error
// (websocket.CloseStatus tells the remote end's close code).
func (p *Peer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Call sends a request and waits for its response, decoding the result
// into result (unless nil). An error response is returned as *Error. The
// call ends early when ctx is done or the connection closes (ErrClosed).
func (p *Peer) Call(ctx context.Context, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := p.nextID.Add(1)
	b, err := proto.EncodeRequest(id, method, params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	key := strconv.FormatUint(id, 10)
	ch := make(chan *proto.Frame, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return p.closedErr()
	}
	p.pending[key] = ch
	p.mu.Unlock()
	if err := p.write(b); err != nil {
		p.forget(key)
		return err
	}
	select {
	case f := <-ch:
		if f.Error != nil {
			return f.Error
		}
		if result != nil {
			if err := json.Unmarshal(f.Result, result); err != nil {
				return fmt.Errorf("decode %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		p.forget(key)
		return ctx.Err()
	case <-p.closing:
		return p.closedErr()
	}
}

// Notify sends a notification.
func (p *Peer) Notify(method string, params any) error {
	b, err := proto.EncodeNotification(method, params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	return p.write(b)
}

// SendError writes an error response with id (nil is null) outside any
// exchange: for a message that gets no answer of its own, such as a
// notification that breaks the protocol before the connection closes.
func (p *Peer) SendError(id json.RawMessage, e *proto.Error) error {
	return p.write(proto.EncodeError(id, e))
}

// Close starts the close handshake with code and reason and returns at
// once; pending calls fail with ErrClosed and incoming frames are no
// longer dispatched. Done tells when it is over. Only the first Close (or
// Kill) counts.
func (p *Peer) Close(code websocket.StatusCode, reason string) {
	p.closeOnce.Do(func() {
		p.fail(websocket.CloseError{Code: code, Reason: reason})
		go func() {
			defer close(p.closer)
			_ = p.conn.Close(code, reason)
		}()
	})
}

// Kill tears the connection down without waiting for the remote end, also
// cutting short a close handshake in progress.
func (p *Peer) Kill() {
	p.cancel()
	if p.netConn != nil {
		_ = p.netConn.Close()
	}
	p.shut(errKilled)
}

// Accept is websocket.Accept that also returns the hijacked network
// connection, for Options.NetConn.
func Accept(w http.ResponseWriter, r *http.Request, opts *websocket.AcceptOptions) (*websocket.Conn, net.Conn, error) {
	rec := &hijackRecorder{ResponseWriter: w}
	c, err := websocket.Accept(rec, r, opts)
	return c, rec.conn, err
}

// hijackRecorder keeps the connection websocket.Accept hijacks.
type hijackRecorder struct {
	http.ResponseWriter
	conn net.Conn
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.conn = c
	return c, brw, err
}

func (h *hijackRecorder) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// shut ends the connection at once unless Close already started.
func (p *Peer) shut(err error) {
	p.closeOnce.Do(func() {
		p.fail(err)
		_ = p.conn.CloseNow()
		close(p.closer)
	})
}

// fail records the reason and releases every pending call.
func (p *Peer) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.pending = nil
	p.mu.Unlock()
	close(p.closing)
}

func (p *Peer) closedErr() error {
	return fmt.Errorf("%w: %w", ErrClosed, p.Err())
}

func (p *Peer) forget(key string) {
	p.mu.Lock()
	delete(p.pending, key)
	p.mu.Unlock()
}

// write sends one message. It never uses a caller's context: the library
// closes the connection when a write's context ends.
func (p *Peer) write(b []byte) error {
	ctx, cancel := context.WithTimeout(p.ctx, p.writeTimeout)
	defer cancel()
	if err := p.conn.Write(ctx, websocket.MessageText, b); err != nil {
		if p.Err() != nil {
			return p.closedErr()
		}
		return fmt.Errorf("%w: write: %w", ErrClosed, err)
	}
	return nil
}

func (p *Peer) read() {
	var readErr error
	defer func() {
		p.shut(readErr)
		<-p.closer
		p.cancel()
		if p.onClose != nil {
			p.onClose(p.Err())
		}
		close(p.done)
	}()
	for {
		typ, b, err := p.conn.Read(p.ctx)
		if err != nil {
			readErr = err
			return
		}
		select {
		case <-p.closing:
			continue // closing: the handshake drains what is left
		default:
		}
		if typ != websocket.MessageText {
			p.reject(nil, proto.Errorf(proto.CodeInvalidRequest, "Invalid Request: binary message"))
			continue
		}
		p.dispatch(b)
	}
}

// dispatch handles one incoming message.
func (p *Peer) dispatch(b []byte) {
	f, perr := proto.Decode(b)
	if perr != nil {
		if f != nil && !f.IsCall() {
			p.log.Debug("executor: dropping malformed response", slog.Any("error", perr))
			p.reject(nil, nil) // never answered by default: its id is the other side's
			return
		}
		var id json.RawMessage
		if f != nil {
			id = f.ID
		}
		p.reject(id, perr)
		return
	}
	switch f.Kind() {
	case proto.KindResponse:
		p.mu.Lock()
		ch, ok := p.pending[string(f.ID)]
		delete(p.pending, string(f.ID))
		p.mu.Unlock()
		if ok {
			ch <- f
		} else {
			p.log.Debug("executor: response to no pending request", slog.String("id", string(f.ID)))
			p.reject(nil, nil)
		}
	case proto.KindNotification:
		_, after, err := p.serve(f)
		if err != nil {
			p.log.Debug("executor: notification failed", slog.String("method", f.Method), slog.Any("error", err))
		}
		if after != nil {
			after()
		}
	case proto.KindRequest:
		res, after, err := p.serve(f)
		if err != nil {
			e := FromError(err)
			if e.Code == proto.CodeInternal && !errors.As(err, new(*proto.Error)) {
				p.log.Error("executor: request failed", slog.String("method", f.Method), slog.Any("error", err))
			}
			p.send(proto.EncodeError(f.ID, e))
		} else if out, err := proto.EncodeResult(f.ID, res); err != nil {
			p.log.Error("executor: encode result", slog.String("method", f.Method), slog.Any("error", err))
			p.send(proto.EncodeError(f.ID, proto.Errorf(proto.CodeInternal, "Internal error")))
		} else {
			p.send(out)
		}
		if after != nil {
			after()
		}
	}
}

// reject answers a message the handler does not see with e (nothing when
// nil), unless Options.Invalid decides otherwise; id is the id to
// answer with.
func (p *Peer) reject(id json.RawMessage, e *proto.Error) {
	var after func()
	if p.invalid != nil {
		if r := p.invalid(e); r != nil {
			e, after = nil, r.After
			if r.Err != nil {
				e = FromError(r.Err)
			}
		}
	}
	if e != nil {
		p.send(proto.EncodeError(id, e))
	}
	if after != nil {
		after()
	}
}

// serve runs the handler and unpacks a *Reply.
func (p *Peer) serve(f *proto.Frame) (any, func(), error) {
	if p.handler == nil {
		return nil, nil, proto.Errorf(proto.CodeMethodNotFound, "Method not found: %s", f.Method)
	}
	res, err := p.handler(p.ctx, f)
	if r, ok := res.(*Reply); ok && err == nil {
		return r.Result, r.After, r.Err
	}
	return res, nil, err
}

// send writes an answer; a failure means the connection is going away,
// which the reader will notice.
func (p *Peer) send(b []byte) {
	if err := p.write(b); err != nil {
		p.log.Debug("executor: write failed", slog.Any("error", err))
	}
}
