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
// when Config.MaxFrameSize is zero.
const DefaultMaxFrameSize = 16 << 20

// errFrameTooLarge ends a stream whose next line exceeds the size limit.
var errFrameTooLarge = errors.New("frame exceeds size limit")

// frame is one JSON-RPC object of an /rpc response.
type frame struct {
	ID     json.RawMessage `json:"id"` // nil when absent, "null" when null
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *wireError      `json:"error"`
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

// frameReader reads NDJSON frames with a bound on each line.
type frameReader struct {
	r    *bufio.Reader
	max  int
	line []byte
}

func newFrameReader(r io.Reader, max int) *frameReader {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	return &frameReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next returns the next frame, skipping blank lines. It returns io.EOF
// at a clean end of input between frames; a final line without its
// newline still counts as a frame. Other errors: errFrameTooLarge, a
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
		return decodeFrame(line)
	}
}

// readLine returns the next line without its newline. At end of input it
// returns what it has with io.EOF.
func (fr *frameReader) readLine() ([]byte, error) {
	fr.line = fr.line[:0]
	for {
		chunk, err := fr.r.ReadSlice('\n')
		if len(fr.line)+len(chunk) > fr.max+1 || (len(fr.line)+len(chunk) > fr.max && !bytes.HasSuffix(chunk, []byte("\n"))) {
			return nil, errFrameTooLarge
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

// decodeFrame parses one line as a JSON-RPC frame object.
func decodeFrame(line []byte) (*frame, error) {
	line = bytes.TrimSpace(line)
	if line[0] != '{' {
		return nil, malformed(line, errors.New("not a JSON object"))
	}
	f := new(frame)
	if err := json.Unmarshal(line, f); err != nil {
		return nil, malformed(line, err)
	}
	if _, ok := f.kind(); !ok {
		return nil, malformed(line, errors.New("no method, result or error member"))
	}
	return f, nil
}

func malformed(line []byte, err error) error {
	const show = 80
	if len(line) > show {
		line = line[:show]
	}
	return fmt.Errorf("malformed frame %q: %w", line, err)
}
