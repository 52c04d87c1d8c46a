// Package sse decodes a server-sent event stream (the text/event-stream
// format of the HTML Living Standard) as model APIs send it.
//
// Lines end in CRLF, LF or a lone CR; a leading byte-order mark is skipped;
// lines starting with ':' are comments; "event", "data" and "id" fields are
// honoured and "retry" and unknown fields ignored. A blank line dispatches
// the event built so far, unless it has no data. An event left incomplete
// when the stream ends is discarded, as the standard says, so a stream cut
// mid-event never yields half an event.
//
//	dec := sse.NewDecoder(resp.Body)
//	for {
//		ev, err := dec.Next()
//		if err == io.EOF {
//			break // the stream ended
//		}
//		if err != nil {
//			return err
//		}
//		handle(ev.Type, ev.Data)
//	}
//
// Writer is the serving side: it writes events as an HTTP reply (Baton's
// model gateway streams its replies with it).
package sse

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// DefaultMaxEvent is the default bound on one line and on one event's data.
const DefaultMaxEvent = 8 << 20

// ErrTooLong reports a line or an event larger than the decoder's bound.
var ErrTooLong = errors.New("sse: event too long")

// errReleased is what a decoder returns once released.
var errReleased = errors.New("sse: decoder released")

// Read buffers: each decoder starts with one of readSize bytes; Release
// gives back one no larger than maxPooled.
const (
	readSize  = 4 << 10
	maxPooled = 64 << 10
)

var bufs = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

// Event is one dispatched event.
type Event struct {
	// Type is the event's "event" field, or "message" when it had none.
	Type string
	// ID is the stream's last event ID at dispatch time.
	ID string
	// Data is the event's data lines joined by "\n". It is only valid
	// until the next call to Next.
	Data []byte
}

// Decoder reads events from a stream. It is not safe for concurrent use.
type Decoder struct {
	r   io.Reader
	max int
	err error // sticky read error

	buf        []byte
	start, end int  // unread bytes are buf[start:end]
	skipLF     bool // the last line ended in a CR that may pair with an LF
	begun      bool // the byte-order mark check is done

	data     []byte // data buffer: each line followed by "\n"
	typ      []byte // event type buffer
	id       string
	lastType string // the last Type returned, reused to save allocations
}

// NewDecoder returns a decoder reading r with the DefaultMaxEvent bound.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: r, max: DefaultMaxEvent, buf: *bufs.Get().(*[]byte)}
}

// Release hands the decoder's read buffer to later decoders; a model call
// need not allocate one each time. Neither the decoder nor the Data of an
// event it returned may be used afterwards (Next returns an error).
func (d *Decoder) Release() {
	if d.buf == nil {
		return
	}
	if cap(d.buf) <= maxPooled {
		b := d.buf[:cap(d.buf)]
		bufs.Put(&b)
	}
	d.buf, d.data, d.start, d.end = nil, nil, 0, 0
	d.r, d.err = nil, errReleased
}

// SetMax changes the bound on one line and on one event's data (n > 0).
func (d *Decoder) SetMax(n int) {
	if n > 0 {
		d.max = n
	}
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// a read error is returned as is, and every later call returns it again.
func (d *Decoder) Next() (Event, error) {
	d.data = d.data[:0]
	d.typ = d.typ[:0]
	for {
		line, err := d.line()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if len(d.data) == 0 {
				d.typ = d.typ[:0]
				continue
			}
			return d.event(), nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, line[len(line):]
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			field, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			d.typ = append(d.typ[:0], value...)
		case "data":
			if len(d.data)+len(value)+1 > d.max {
				d.err = ErrTooLong
				return Event{}, d.err
			}
			d.data = append(d.data, value...)
			d.data = append(d.data, '\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 && string(value) != d.id {
				d.id = string(value)
			}
		}
	}
}

// event returns the event the buffers hold.
func (d *Decoder) event() Event {
	typ := "message"
	if len(d.typ) > 0 {
		if string(d.typ) != d.lastType {
			d.lastType = string(d.typ)
		}
		typ = d.lastType
	}
	return Event{Type: typ, ID: d.id, Data: d.data[:len(d.data)-1]}
}

// line returns the next line without its terminator. The slice is only
// valid until the next call.
func (d *Decoder) line() ([]byte, error) {
	if !d.begun {
		for d.end-d.start < 3 && d.err == nil {
			d.fill()
		}
		d.begun = true
		if bytes.HasPrefix(d.buf[d.start:d.end], []byte("\xEF\xBB\xBF")) {
			d.start += 3
		}
	}
	for {
		if d.skipLF && d.start < d.end {
			d.skipLF = false
			if d.buf[d.start] == '\n' {
				d.start++
			}
		}
		window := d.buf[d.start:d.end]
		lf := bytes.IndexByte(window, '\n')
		limit := window
		if lf >= 0 {
			limit = window[:lf]
		}
		if cr := bytes.IndexByte(limit, '\r'); cr >= 0 {
			line := window[:cr]
			d.start += cr + 1
			d.skipLF = true
			return line, nil
		}
		if lf >= 0 {
			d.start += lf + 1
			return window[:lf], nil
		}
		if d.err != nil {
			return nil, d.err
		}
		if len(window) >= d.max {
			d.err = ErrTooLong
			return nil, d.err
		}
		d.fill()
	}
}

// fill reads more bytes, making room first.
func (d *Decoder) fill() {
	if d.start > 0 {
		n := copy(d.buf, d.buf[d.start:d.end])
		d.start, d.end = 0, n
	}
	if d.end == len(d.buf) {
		grown := make([]byte, 2*len(d.buf))
		copy(grown, d.buf[:d.end])
		d.buf = grown
	}
	for range 100 {
		n, err := d.r.Read(d.buf[d.end:])
		d.end += n
		if err != nil {
			d.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	d.err = io.ErrNoProgress
}
