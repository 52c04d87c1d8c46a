package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DefaultMaxFrameSize bounds one NDJSON frame and one REST response body
// when Config.MaxFrameSize is zero. A session's frames are larger than the
// requests the server accepts (8 MiB on /rpc): the terminal sendMessage
// frame of a turn carries its events, which copy the user message or tool
// results (client.message.send, tool.result) and the whole transcript
// (provider.request), so one turn with a result near the request limit
// already makes a frame of three times that. The bound only caps how far
// a reader's buffer may grow; nothing is allocated up front.
const DefaultMaxFrameSize = 64 << 20

// errFrameTooLarge matches (errors.Is) the error of a frame or REST
// response body over the size limit, a *sizeError.
var errFrameTooLarge = errors.New("frame exceeds size limit")

// sizeError is a frame or a REST response body over Config.MaxFrameSize;
// its text says what to do about it.
type sizeError struct {
	what  string // "frame" or "response body"
	limit int
}

func (e *sizeError) Error() string {
	return fmt.Sprintf("%s exceeds the size limit of %s; raise Config.MaxFrameSize (default %s) to read it",
		e.what, byteSize(e.limit), byteSize(DefaultMaxFrameSize))
}

// Is reports whether target is errFrameTooLarge.
func (e *sizeError) Is(target error) bool { return target == errFrameTooLarge }

// byteSize renders n as whole MiB when it is one, else in bytes.
func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// frame is one JSON-RPC object of an /rpc response.
type frame struct {
	ID     json.RawMessage `json:"id"` // nil when absent, "null" when null
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *wireError      `json:"error"`

	// Decoded in the same pass as the frame: the params of a session.event
	// notification whose method comes first (as Baton writes it) and, from
	// a reader asked for them, a sendMessage result. The errors are those
	// of valid JSON that is not an event view or a result.
	hasEvent bool
	event    Event
	eventErr error
	send     *sendResult // nil unless decoded
	sendErr  error
}

type wireError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type frameKind int

const (
	kindNote   frameKind = iota // a notification (method set)
	kindResult                  // terminal success
	kindError                   // terminal error (id echoed or null)
	kindLagged                  // id-less -32000 "lagged" error; the stream ends
)

// kind classifies f; ok is false for a frame that is none of the kinds.
// Any frame with an error member ends the call, whatever its id; a frame
// with a result member is terminal.
func (f *frame) kind() (k frameKind, ok bool) {
	switch {
	case f.Error != nil:
		if f.ID == nil && f.Error.Code == -32000 && strings.Contains(f.Error.Message, "lagged") {
			return kindLagged, true
		}
		return kindError, true
	case f.Result != nil:
		return kindResult, true
	case f.Method != "":
		return kindNote, true
	}
	return 0, false
}

// frameReader reads NDJSON frames with a bound on each line. A frame's
// members point into the reader's buffer: they are valid until the next
// call to next, so whatever is kept must be copied (the payload of an
// event, a result).
type frameReader struct {
	r    *bufio.Reader
	max  int
	line []byte // a line longer than r's buffer, gathered
	f    frame  // the frame last returned
	in   interner
	// sendResults has results decoded as sendMessage results.
	sendResults bool
}

// frameBuffer is the size of a frame reader's buffer: lines up to it are
// decoded where they were read.
const frameBuffer = 32 << 10

func newFrameReader(r io.Reader, max int) *frameReader {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	return &frameReader{r: bufio.NewReaderSize(r, frameBuffer), max: max, in: interner{}}
}

// maxKeptLine bounds the long-line buffer a released reader keeps.
const maxKeptLine = 1 << 20

// frameReader returns a reader of body's frames, reusing the buffers of
// a released one.
func (c *conn) frameReader(body io.Reader) *frameReader {
	if fr, ok := c.readers.Get().(*frameReader); ok {
		fr.r.Reset(body)
		return fr
	}
	return newFrameReader(body, c.max)
}

// release gives fr back for reuse: nothing read from it may be used
// afterwards.
func (c *conn) release(fr *frameReader) {
	fr.r.Reset(nil)
	fr.f = frame{}
	fr.sendResults = false
	if cap(fr.line) > maxKeptLine {
		fr.line = nil
	}
	c.readers.Put(fr)
}

// next returns the next frame, skipping blank lines. It returns io.EOF
// at a clean end of input between frames; a final line without its
// newline still counts as a frame. Other errors: a *sizeError, a
// malformed-frame error, or the underlying reader's error.
func (fr *frameReader) next() (*frame, error) {
	for {
		line, err := fr.readLine()
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if err := decodeFrame(line, &fr.f, fr.in, fr.sendResults); err != nil {
			return nil, err
		}
		return &fr.f, nil
	}
}

// readLine returns the next line without its newline. At end of input it
// returns what it has with io.EOF. A line that fits the buffer is
// returned in place, not copied.
func (fr *frameReader) readLine() ([]byte, error) {
	chunk, err := fr.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		if fr.tooLong(0, chunk) {
			return nil, &sizeError{what: "frame", limit: fr.max}
		}
		if err == nil {
			return chunk[:len(chunk)-1], nil
		}
		return chunk, err
	}
	fr.line = append(fr.line[:0], chunk...)
	for {
		chunk, err := fr.r.ReadSlice('\n')
		if fr.tooLong(len(fr.line), chunk) {
			return nil, &sizeError{what: "frame", limit: fr.max}
		}
		fr.line = append(fr.line, chunk...)
		switch err {
		case nil:
			return fr.line[:len(fr.line)-1], nil
		case bufio.ErrBufferFull:
			continue
		default:
			return fr.line, err
		}
	}
}

// tooLong reports whether n bytes already read and chunk make a line
// over the limit (its newline not counted).
func (fr *frameReader) tooLong(n int, chunk []byte) bool {
	n += len(chunk)
	return n > fr.max+1 || n > fr.max && !bytes.HasSuffix(chunk, []byte("\n"))
}

// decodeFrame parses one line as a JSON-RPC frame object into f, whose
// members then point into line. The line is validated whole and read as
// encoding/json would read it into a new frame. sendResults has a result
// decoded as a sendMessage result.
func decodeFrame(line []byte, f *frame, in interner, sendResults bool) error {
	line = bytes.TrimSpace(line)
	if line[0] != '{' {
		return malformed(line, errors.New("not a JSON object"))
	}
	*f = frame{}
	d := decoder{b: line}
	err := d.object(func(k []byte) (err error) {
		switch field(k, "id", "method", "params", "result", "error") {
		case 0:
			f.ID, err = d.raw()
		case 1:
			err = d.str(&f.Method, "method", in.method)
		case 2:
			f.hasEvent = f.Method == "session.event"
			if !f.hasEvent {
				f.Params, err = d.raw()
				break
			}
			f.Params, f.eventErr, err = d.read(func() error { return d.event(&f.event, in) })
		case 3:
			if !sendResults {
				f.Result, err = d.raw()
				break
			}
			f.send = new(sendResult)
			f.Result, f.sendErr, err = d.read(func() error { return f.send.read(&d, in) })
		case 4:
			err = f.decodeError(&d)
		default:
			err = d.value()
		}
		return err
	})
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return malformed(line, err)
	}
	if _, ok := f.kind(); !ok {
		return malformed(line, errors.New("no method, result or error member"))
	}
	return nil
}

// decodeError reads the error member: null clears it, an object fills it.
func (f *frame) decodeError(d *decoder) error {
	null, err := d.expect('{', "error", "an object")
	if err != nil || null {
		f.Error = nil
		return err
	}
	if f.Error == nil {
		f.Error = new(wireError)
	}
	e := f.Error
	return d.object(func(k []byte) error {
		switch field(k, "code", "message") {
		case 0:
			return d.int(&e.Code, "error.code")
		case 1:
			return d.str(&e.Message, "error.message", nil)
		}
		return d.value()
	})
}

func malformed(line []byte, err error) error {
	const show = 80
	if len(line) > show {
		line = line[:show]
	}
	return fmt.Errorf("malformed frame %q: %w", line, err)
}

// interner shares the strings that recur from frame to frame (methods,
// session and key ids, event types) instead of allocating each again.
type interner map[string]string

// maxInterned bounds an interner; it starts over when full.
const maxInterned = 256

func (in interner) str(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	if len(in) >= maxInterned {
		clear(in)
	}
	s := string(b)
	in[s] = s
	return s
}

// fn returns in.str, or nil for a nil interner.
func (in interner) fn() func([]byte) string {
	if in == nil {
		return nil
	}
	return in.str
}

// method returns a method name, the usual ones without allocating.
func (in interner) method(b []byte) string {
	switch string(b) {
	case "session.event":
		return "session.event"
	case DeltaType:
		return DeltaType
	}
	if in == nil {
		return string(b)
	}
	return in.str(b)
}
