package engine

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/baton-engine/baton"
)

// The encoding/json implementations that blocks.go replaced, kept as the
// reference its differential tests and benchmarks compare against. They
// decode with strictUnmarshal: JSON text that is not valid UTF-8 is
// invalid to rawjson.Valid (as to serde_json), where encoding/json takes it.

var errUTF8 = errors.New("invalid UTF-8")

// strictUnmarshal is json.Unmarshal refusing invalid UTF-8.
func strictUnmarshal(b []byte, v any) error {
	if !utf8.Valid(b) {
		return errUTF8
	}
	return json.Unmarshal(b, v)
}

// refBlocks is blocks as encoding/json decodes it.
func refBlocks(content json.RawMessage) ([]baton.Block, bool) {
	var raws []json.RawMessage
	if err := strictUnmarshal(content, &raws); err != nil {
		return nil, false
	}
	out := make([]baton.Block, 0, len(raws))
	for _, r := range raws {
		var b baton.Block
		_ = json.Unmarshal(r, &b) // non-objects stay typeless and are carried as Raw
		b.Raw = r
		out = append(out, b)
	}
	return out, true
}

// refSetKey is setKey through a map[string]json.RawMessage.
func refSetKey(obj json.RawMessage, key string, value any) json.RawMessage {
	var m map[string]json.RawMessage
	if strictUnmarshal(obj, &m) != nil || m == nil {
		return obj
	}
	if value == nil {
		if _, ok := m[key]; !ok {
			return obj
		}
		delete(m, key)
	} else {
		v, _ := json.Marshal(value)
		m[key] = v
	}
	out, _ := json.Marshal(m)
	return out
}

// refMapToolUses is mapToolUses through json.Marshal.
func refMapToolUses(content json.RawMessage, f func(b baton.Block) json.RawMessage) json.RawMessage {
	bs, ok := refBlocks(content)
	if !ok {
		return content
	}
	out := make([]json.RawMessage, len(bs))
	changed := false
	for i, b := range bs {
		out[i] = b.Raw
		if b.Type == "tool_use" {
			out[i] = f(b)
			changed = true
		}
	}
	if !changed {
		return content
	}
	raw, _ := json.Marshal(out)
	return raw
}

// refConcatContent is concatContent through json.Marshal.
func refConcatContent(a, b json.RawMessage) json.RawMessage {
	var all []json.RawMessage
	for _, c := range []json.RawMessage{a, b} {
		if bs, ok := refBlocks(c); ok {
			for _, x := range bs {
				all = append(all, x.Raw)
			}
			continue
		}
		var s string
		if strictUnmarshal(c, &s) == nil && s != "" {
			all = append(all, mustJSON(map[string]string{"type": "text", "text": s}))
		}
	}
	if all == nil {
		all = []json.RawMessage{}
	}
	return mustJSON(all)
}
