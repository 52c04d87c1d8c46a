package rawjson

import (
	"encoding/json"

	"github.com/baton-engine/baton"
)

// Request bodies and provider.request payloads carry a whole conversation
// on every model call. These functions append it as encoding/json would
// (no HTML escaping, as baton.EncodeJSON) without re-validating contents
// that are valid JSON already.

// AppendMessages appends msgs to b as a JSON array of {"role","content"}
// objects, as baton.EncodeJSON would write them but without re-validating
// each content: every Message Baton builds or decodes holds valid JSON, and
// a conversation is re-sent whole on every model call. An empty content is
// written as null.
func AppendMessages(b []byte, msgs []baton.Message) []byte {
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = AppendString(b, m.Role, false)
		b = append(b, `,"content":`...)
		if len(m.Content) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, m.Content...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// EncodedSize is about how many bytes AppendMessages and AppendRaw write
// for msgs and tools: the capacity to give a request body up front.
func EncodedSize(msgs []baton.Message, tools []json.RawMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + 32
	}
	for _, t := range tools {
		n += len(t) + 1
	}
	return n
}

// AppendRaw appends vals to b as a JSON array; like AppendMessages, it
// trusts each value to be valid JSON.
func AppendRaw(b []byte, vals []json.RawMessage) []byte {
	b = append(b, '[')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}
