package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/provider"
)

// maxBlocks bounds the content block index a stream may use.
const maxBlocks = 4096

// event is the raw fields of one stream event. The slices point into the
// event's data and are only valid while it is handled; whatever is kept is
// copied.
type event struct {
	Type         []byte // decoded
	Index        int    // -1 when absent or not a small integer
	Message      []byte
	ContentBlock []byte
	Delta        []byte
	Usage        []byte
	Error        []byte
}

// block is one content block being streamed: its content_block_start
// object plus the deltas that arrived for it.
type block struct {
	start     []byte
	text      []byte // text_delta, appended to "text"
	thinking  []byte // thinking_delta, appended to "thinking"
	signature []byte // signature_delta, appended to "signature"
	input     []byte // input_json_delta fragments, replacing "input"
	citations [][]byte
	has       uint8 // which of the fields above received a delta
}

const (
	hasText = 1 << iota
	hasThinking
	hasSignature
	hasInput
	hasCitations
)

// assembler rebuilds a Messages API reply from its stream events.
type assembler struct {
	onDelta func(string)
	status  int
	max     int // bytes the kept parts of the reply may add up to
	size    int // bytes kept so far

	message []byte   // message_start's message
	usage   []byte   // usage, merged from message_start and message_delta
	deltas  [][]byte // message_delta deltas, in order
	blocks  []*block
	done    bool // message_stop arrived

	ev event
}

// failure is a malformed stream: not retryable.
func (a *assembler) failure(format string, args ...any) *baton.ProviderError {
	return &baton.ProviderError{Status: a.status, Detail: fmt.Sprintf(format, args...)}
}

// grow counts n more bytes kept and fails once they pass a.max.
func (a *assembler) grow(n int) error {
	a.size += n
	if a.size > a.max {
		return provider.TooLarge(a.status, a.max)
	}
	return nil
}

// add handles one event: name is its SSE event type, used when the data
// names none. It returns an error for an error event or a malformed event.
func (a *assembler) add(name string, data []byte) error {
	if err := a.decode(data); err != nil {
		e := a.failure("provider returned a malformed stream event: %v", err)
		e.Body = string(data)
		return e
	}
	ev := &a.ev
	typ := string(ev.Type) // the switch below does not allocate
	if len(ev.Type) == 0 {
		typ = name
	}
	switch typ {
	case "message_start":
		if !isObject(ev.Message) {
			return a.failure("provider stream message_start has no message")
		}
		if err := a.grow(len(ev.Message)); err != nil {
			return err
		}
		a.message = bytes.Clone(ev.Message)
		a.usage = bytes.Clone(field(a.message, "usage"))
	case "content_block_start":
		if ev.Index < 0 || ev.Index >= maxBlocks {
			return a.failure("provider stream content_block_start has an invalid index")
		}
		if !isObject(ev.ContentBlock) {
			return a.failure("provider stream content_block_start has no content_block")
		}
		if err := a.grow(len(ev.ContentBlock)); err != nil {
			return err
		}
		for len(a.blocks) <= ev.Index {
			a.blocks = append(a.blocks, nil)
		}
		a.blocks[ev.Index] = &block{start: bytes.Clone(ev.ContentBlock)}
	case "content_block_delta":
		return a.blockDelta()
	case "message_delta":
		if isObject(ev.Delta) {
			if err := a.grow(len(ev.Delta)); err != nil {
				return err
			}
			a.deltas = append(a.deltas, bytes.Clone(ev.Delta))
		}
		if isObject(ev.Usage) {
			var set []member
			_ = rawjson.EachMember(ev.Usage, func(k, v []byte) {
				if len(set) < 64 {
					set = append(set, member{string(k), v})
				}
			})
			base := a.usage
			if !isObject(base) {
				base = []byte("{}")
			}
			u, err := appendPatched(nil, base, set)
			if err != nil {
				return a.failure("provider stream has a malformed usage object")
			}
			a.usage = u
		}
	case "message_stop":
		a.done = true
	case "error":
		e := &baton.ProviderError{Status: a.status, Body: string(data), Detail: "provider stream error"}
		var ae APIError
		if json.Unmarshal(ev.Error, &ae) == nil && ae.Type != "" {
			e.Detail += ": " + ae.Type
			if ae.Message != "" {
				e.Detail += ": " + ae.Message
			}
			switch ae.Type {
			case "overloaded_error", "api_error", "rate_limit_error":
				e.Retryable = true
			}
		}
		return e
	}
	// ping, content_block_stop and unknown events carry nothing to keep.
	return nil
}

// decode fills a.ev from an event's data without encoding/json's
// allocations: the data is validated, then its top-level fields sliced out.
// As with encoding/json, a repeated field's last value wins.
func (a *assembler) decode(data []byte) error {
	if !json.Valid(data) {
		var v any
		return json.Unmarshal(data, &v) // for its error text
	}
	ev := &a.ev
	*ev = event{Type: ev.Type[:0], Index: -1}
	var typ []byte
	err := rawjson.EachMember(data, func(k, v []byte) {
		switch string(k) {
		case "type":
			typ = v
		case "index":
			ev.Index = smallInt(v)
		case "message":
			ev.Message = v
		case "content_block":
			ev.ContentBlock = v
		case "delta":
			ev.Delta = v
		case "usage":
			ev.Usage = v
		case "error":
			ev.Error = v
		}
	})
	if err != nil {
		return err
	}
	if typ != nil && string(typ) != "null" {
		var ok bool
		if ev.Type, ok = rawjson.AppendUnquoted(ev.Type, typ); !ok {
			return errors.New(`"type" is not a string`)
		}
	}
	return nil
}

// blockDelta applies a content_block_delta event.
func (a *assembler) blockDelta() error {
	ev := &a.ev
	if ev.Index < 0 || ev.Index >= len(a.blocks) || a.blocks[ev.Index] == nil {
		return a.failure("provider stream has a delta for an unknown content block")
	}
	b := a.blocks[ev.Index]
	var typ, text, partial, thinking, signature, citation []byte
	err := rawjson.EachMember(ev.Delta, func(k, v []byte) {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		case "partial_json":
			partial = v
		case "thinking":
			thinking = v
		case "signature":
			signature = v
		case "citation":
			citation = v
		}
	})
	if err != nil {
		return a.failure("provider stream content_block_delta has no delta")
	}
	before := len(b.text) + len(b.input) + len(b.thinking) + len(b.signature)
	ok := true
	// str appends the JSON string v to dst; a missing value adds nothing.
	str := func(dst, v []byte) []byte {
		if v == nil || !ok {
			return dst
		}
		dst, ok = rawjson.AppendUnquoted(dst, v)
		return dst
	}
	var emit []byte // text to pass to onDelta once the size is checked
	switch string(typ) {
	case `"text_delta"`:
		n := len(b.text)
		b.text = str(b.text, text)
		b.has |= hasText
		emit = b.text[n:]
	case `"input_json_delta"`:
		b.input = str(b.input, partial)
		b.has |= hasInput
	case `"thinking_delta"`:
		b.thinking = str(b.thinking, thinking)
		b.has |= hasThinking
	case `"signature_delta"`:
		b.signature = str(b.signature, signature)
		b.has |= hasSignature
	case `"citations_delta"`:
		if isObject(citation) {
			before -= len(citation)
			b.citations = append(b.citations, bytes.Clone(citation))
			b.has |= hasCitations
		}
	}
	if !ok {
		return a.failure("provider stream has a malformed content_block_delta")
	}
	if err := a.grow(len(b.text) + len(b.input) + len(b.thinking) + len(b.signature) - before); err != nil {
		return err
	}
	if a.onDelta != nil && len(emit) > 0 {
		a.onDelta(string(emit))
	}
	return nil
}

// smallInt parses a non-negative JSON integer below maxBlocks, or returns
// -1.
func smallInt(v []byte) int {
	if len(v) == 0 || len(v) > 4 {
		return -1
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// finish returns the reassembled message, its content array and its usage.
func (a *assembler) finish() (body, content []byte, usage *baton.Usage, err error) {
	if a.message == nil {
		return nil, nil, nil, a.failure("provider stream has no message_start")
	}
	n := 2
	for _, b := range a.blocks {
		if b != nil {
			n += len(b.start) + len(b.text) + len(b.input) + len(b.thinking) + 16
		}
	}
	content = make([]byte, 0, n)
	content = append(content, '[')
	first := true
	for _, b := range a.blocks {
		if b == nil {
			continue
		}
		if !first {
			content = append(content, ',')
		}
		first = false
		if content, err = a.appendBlock(content, b); err != nil {
			return nil, nil, nil, err
		}
	}
	content = append(content, ']')

	set := []member{{"content", content}}
	for _, d := range a.deltas {
		_ = rawjson.EachMember(d, func(k, v []byte) {
			for i := range set {
				if set[i].Key == string(k) {
					set[i].Val = v
					return
				}
			}
			if len(set) < 63 {
				set = append(set, member{string(k), v})
			}
		})
	}
	if a.usage != nil {
		set = append(set, member{"usage", a.usage})
	}
	body, err = appendPatched(make([]byte, 0, len(a.message)+len(content)+len(a.usage)+64), a.message, set)
	if err != nil {
		return nil, nil, nil, a.failure("provider stream message_start has a malformed message")
	}
	if a.usage != nil {
		var u baton.Usage
		if json.Unmarshal(a.usage, &u) == nil {
			usage = &u
		}
	}
	return body, content, usage, nil
}

// appendBlock appends block b with its deltas applied.
func (a *assembler) appendBlock(dst []byte, b *block) ([]byte, error) {
	if b.has == 0 {
		return append(dst, b.start...), nil
	}
	var set [5]member
	n := 0
	str := func(key string, delta []byte) {
		v := make([]byte, 0, len(delta)+8)
		var prefix string
		if old := field(b.start, key); len(old) > 2 {
			_ = json.Unmarshal(old, &prefix)
		}
		if prefix == "" {
			v = rawjson.AppendString(v, delta, false)
		} else {
			v = rawjson.AppendString(v, prefix+string(delta), false)
		}
		set[n] = member{key, v}
		n++
	}
	if b.has&hasText != 0 {
		str("text", b.text)
	}
	if b.has&hasThinking != 0 {
		str("thinking", b.thinking)
	}
	if b.has&hasSignature != 0 {
		str("signature", b.signature)
	}
	if b.has&hasInput != 0 {
		var in bytes.Buffer
		if len(bytes.TrimSpace(b.input)) == 0 {
			in.WriteString("{}")
		} else if err := json.Compact(&in, b.input); err != nil {
			return nil, a.failure("provider stream tool input is not valid JSON: %v", err)
		}
		set[n] = member{"input", in.Bytes()}
		n++
	}
	if b.has&hasCitations != 0 {
		v := []byte{'['}
		if old := bytes.TrimSpace(field(b.start, "citations")); len(old) > 2 && old[0] == '[' {
			if inner := bytes.TrimSpace(old[1 : len(old)-1]); len(inner) > 0 {
				v = append(v, inner...)
				v = append(v, ',')
			}
		}
		v = append(v, bytes.Join(b.citations, []byte{','})...)
		set[n] = member{"citations", append(v, ']')}
		n++
	}
	dst, err := appendPatched(dst, b.start, set[:n])
	if err != nil {
		return nil, a.failure("provider stream has a malformed content block")
	}
	return dst, nil
}

// isObject reports whether raw JSON is an object.
func isObject(raw []byte) bool {
	i := rawjson.SkipSpace(raw, 0)
	return i < len(raw) && raw[i] == '{'
}
