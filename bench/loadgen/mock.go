package main

import (
	"bytes"
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
)

// maxMockRequest bounds one request body the mock reads: histories grow
// with every round trip, so this is generous.
const maxMockRequest = 64 << 20

// mock is a zero-latency model speaking Anthropic's Messages API with
// server-sent events. It holds no conversation state: when the last
// message carries tool_result blocks it replies with text, otherwise it
// calls the first advertised tool perTurn times in parallel. It is built
// to cost its host little: a request is read without decoding its
// history, and the reply's events are built whole and sent in one write
// with a Content-Length.
type mock struct {
	addr    string
	perTurn int
	log     *slog.Logger

	ln    net.Listener
	srv   *http.Server
	done  chan error
	calls atomic.Int64 // answered requests
	ids   atomic.Int64 // tool_use id counter
	bufs  sync.Pool    // *bytes.Buffer: a request body, then its reply
}

// newMock returns a mock that will listen on addr and ask for perTurn
// tool calls (at least one) per reply.
func newMock(addr string, perTurn int, log *slog.Logger) *mock {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &mock{addr: addr, perTurn: max(perTurn, 1), log: log}
}

// Open starts listening and serving.
func (m *mock) Open(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", m.addr)
	if err != nil {
		return fmt.Errorf("mock provider: %w", err)
	}
	m.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", m.messages)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.done = make(chan error, 1)
	go func() { m.done <- m.srv.Serve(ln) }()
	return nil
}

// URL is the base URL the mock serves, for bae-config.toml's base_url.
func (m *mock) URL() string { return "http://" + m.ln.Addr().String() }

// Calls returns how many requests the mock answered.
func (m *mock) Calls() int64 { return m.calls.Load() }

// Close stops the server and waits for its goroutine.
func (m *mock) Close() error {
	if m.srv == nil {
		return nil
	}
	err := m.srv.Close()
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	m.srv = nil
	return err
}

// Sizes of a reply without tool calls and of each tool call block, with
// room for long model and tool names.
const (
	replySize = 1 << 10
	blockSize = 512
)

// mockRequest is what the mock reads of a Messages API request.
type mockRequest struct {
	model    []byte // the model's JSON string, nil when absent
	tool     []byte // the first tool's name as a JSON string, nil when none
	messages int
	results  bool // the last message is a user message with tool_result blocks
}

// parseRequest reads body only as far as the mock needs: the members of
// the request object and of its last message are located, the rest of the
// history is skipped without being decoded or validated (Baton's encoder
// wrote it). A body that is not shaped like a request is an error. As with
// encoding/json, the last of duplicate members counts and null is absent.
func parseRequest(body []byte) (*mockRequest, error) {
	req := new(mockRequest)
	err := members(body, func(key, val []byte) (err error) {
		switch {
		case isString(key, "model"):
			req.model, err = literal(val)
		case isString(key, "messages"):
			var last []byte
			req.messages = 0
			err = elements(val, func(m []byte) error {
				req.messages++
				last = m
				return nil
			})
			req.results = false
			if err == nil && last != nil {
				req.results, err = answersResults(last)
			}
		case isString(key, "tools"):
			req.tool = nil
			first := true
			err = elements(val, func(t []byte) error {
				if !first {
					return nil
				}
				first = false
				return members(t, func(key, val []byte) (err error) {
					if isString(key, "name") {
						req.tool, err = literal(val)
					}
					return err
				})
			})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

// answersResults reports whether msg is a user message holding tool_result
// blocks. Content that is not an array of objects holds none.
func answersResults(msg []byte) (bool, error) {
	user, results := false, false
	err := members(msg, func(key, val []byte) error {
		switch {
		case isString(key, "role"):
			user = isString(val, "user")
		case isString(key, "content"):
			results = false
			err := elements(val, func(b []byte) error {
				var typ []byte
				err := members(b, func(key, val []byte) error {
					if isString(key, "type") {
						typ = val
					}
					return nil
				})
				results = results || typ != nil && isString(typ, "tool_result")
				return err
			})
			results = results && err == nil
		}
		return nil
	})
	return user && results, err
}

// isString reports whether the raw JSON value val is the string s.
func isString(val []byte, s string) bool {
	if bytes.IndexByte(val, '\\') < 0 {
		return len(val) == len(s)+2 && val[0] == '"' && string(val[1:len(val)-1]) == s
	}
	var v string
	return json.Unmarshal(val, &v) == nil && v == s
}

// errShape is a request body the mock cannot find its way through.
var errShape = errors.New("malformed JSON")

// members calls fn with the raw key (quotes included) and the raw value of
// each member of the object obj. null has none.
func members(obj []byte, fn func(key, val []byte) error) error {
	if string(obj) == "null" {
		return nil
	}
	c := cursor{b: obj}
	return c.list('{', '}', func() error {
		key := c.next()
		if key == nil || key[0] != '"' || !c.eat(':') {
			return errShape
		}
		val := c.next()
		if val == nil {
			return errShape
		}
		return fn(key, val)
	})
}

// elements calls fn with each raw element of the array arr. null has
// none.
func elements(arr []byte, fn func(val []byte) error) error {
	if string(arr) == "null" {
		return nil
	}
	c := cursor{b: arr}
	return c.list('[', ']', func() error {
		val := c.next()
		if val == nil {
			return errShape
		}
		return fn(val)
	})
}

// cursor walks JSON text without validating it: it only finds where the
// values begin and end.
type cursor struct {
	b []byte
	i int
}

func (c *cursor) blank() {
	for c.i < len(c.b) && (c.b[c.i] == ' ' || c.b[c.i] == '\t' || c.b[c.i] == '\n' || c.b[c.i] == '\r') {
		c.i++
	}
}

// eat consumes the byte ch after blanks.
func (c *cursor) eat(ch byte) bool {
	if c.blank(); c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

// list reads open, then items separated by commas, then close, and
// nothing after. item reads one item.
func (c *cursor) list(open, close byte, item func() error) error {
	if !c.eat(open) {
		return errShape
	}
	if !c.eat(close) {
		for {
			if err := item(); err != nil {
				return err
			}
			if c.eat(close) {
				break
			}
			if !c.eat(',') {
				return errShape
			}
		}
	}
	if c.blank(); c.i != len(c.b) {
		return errShape
	}
	return nil
}

// next returns the raw value after blanks and moves past it; nil when the
// text ends inside it.
func (c *cursor) next() []byte {
	c.blank()
	start, depth := c.i, 0
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case '"':
			end := closingQuote(c.b, c.i+1)
			if end < 0 {
				return nil
			}
			c.i = end + 1
			if depth == 0 {
				return c.b[start:c.i]
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // ends a scalar
				return c.scalar(start)
			}
			if depth--; depth == 0 {
				c.i++
				return c.b[start:c.i]
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return c.scalar(start)
			}
		}
		c.i++
	}
	if depth == 0 {
		return c.scalar(start)
	}
	return nil
}

func (c *cursor) scalar(start int) []byte {
	if c.i == start {
		return nil
	}
	return c.b[start:c.i]
}

// closingQuote returns the index of the quote that ends the string whose
// text starts at b[i], or -1.
func closingQuote(b []byte, i int) int {
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		escapes := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			escapes++
		}
		if escapes%2 == 0 {
			return i
		}
		i++
	}
}

func (m *mock) messages(w http.ResponseWriter, r *http.Request) {
	buf := m.buffer()
	defer m.bufs.Put(buf)
	_, err := buf.ReadFrom(io.LimitReader(r.Body, maxMockRequest+1))
	var req *mockRequest
	switch {
	case err != nil:
	case buf.Len() > maxMockRequest:
		err = errors.New("request body too large")
	default:
		req, err = parseRequest(buf.Bytes())
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"malformed request"}}`)
		m.log.Warn("mock provider: bad request", "err", err)
		return
	}
	n := m.calls.Add(1)
	// The reply goes after the request in the buffer: req points into the
	// request. Once the pool's buffers have grown, that allocates nothing.
	buf.Grow(replySize + m.perTurn*blockSize)
	out := m.reply(buf.AvailableBuffer(), req, n)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	if _, err := w.Write(out); err != nil {
		m.log.Debug("mock provider: write", "err", err)
	}
}

// buffer returns a reset buffer from the mock's pool.
func (m *mock) buffer() *bytes.Buffer {
	if b, ok := m.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// reply appends the whole server-sent event stream answering req, the
// n-th call, to dst: text when the request answers tool calls or offers
// no tool, else perTurn parallel calls of the first tool.
func (m *mock) reply(dst []byte, req *mockRequest, n int64) []byte {
	model := req.model
	if model == nil {
		model = []byte(`"loadgen-mock"`)
	}
	dst = append(dst, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_loadgen"...)
	dst = appendPadded(dst, n, 14)
	dst = append(dst, `","type":"message","role":"assistant","model":`...)
	dst = append(dst, model...)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(req.messages), 10)
	dst = append(dst, ",\"output_tokens\":1}}}\n\n"...)
	stop := "end_turn"
	if req.results || req.tool == nil {
		dst = appendBlock(dst, 0, []byte(`{"type":"text","text":""}`), `{"type":"text_delta","text":"done"}`)
	} else {
		stop = "tool_use"
		var scratch [128]byte
		for i := range m.perTurn {
			block := append(scratch[:0], `{"type":"tool_use","id":"toolu_loadgen`...)
			block = appendPadded(block, m.ids.Add(1), 11)
			block = append(block, `","name":`...)
			block = append(block, req.tool...)
			block = append(block, `,"input":{}}`...)
			dst = appendBlock(dst, i, block, `{"type":"input_json_delta","partial_json":"{}"}`)
		}
	}
	dst = append(dst, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	dst = append(dst, stop...)
	dst = append(dst, "\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"...)
	return append(dst, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

// appendBlock appends the three events of content block index: its
// start with block, one delta, its stop.
func appendBlock(dst []byte, index int, block []byte, delta string) []byte {
	dst = append(dst, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"content_block":`...)
	dst = append(dst, block...)
	dst = append(dst, "}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"delta":`...)
	dst = append(dst, delta...)
	dst = append(dst, "}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	return append(dst, "}\n\n"...)
}

// appendPadded appends n in decimal, zero-padded to width digits.
func appendPadded(dst []byte, n int64, width int) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], n, 10)
	for range width - len(d) {
		dst = append(dst, '0')
	}
	return append(dst, d...)
}

// literal returns the JSON string val in a form safe to copy into a
// reply: as is when it holds no escape or control character, else
// decoded and encoded again (which checks it). null is nil.
func literal(val []byte) ([]byte, error) {
	if string(val) == "null" {
		return nil, nil
	}
	if val[0] != '"' {
		return nil, errShape
	}
	if !bytes.ContainsFunc(val[1:len(val)-1], func(r rune) bool { return r < 0x20 || r == '\\' }) {
		return val, nil
	}
	var s string
	if err := json.Unmarshal(val, &s); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}
