package engine

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
)

// This file reads and rewrites content block arrays with internal/rawjson
// rather than encoding/json's reflection. The results are byte for byte
// those of the encoding/json code they replace (blocks_ref_test.go keeps
// it, and fuzz tests compare the two), down to how a mistyped or repeated
// field decodes and how the output is compacted and HTML-escaped.

// The fields of baton.Block that a key can feed, the string ones (ID
// included) first.
const (
	fieldType = iota
	fieldID
	fieldName
	fieldToolUseID
	fieldDispatch
	fieldInput
	fieldContent
	fieldIsError
	fieldNone
)

// numStr is the number of string fields.
const numStr = fieldInput

// blockFieldName is the JSON name of field f.
func blockFieldName(f int) string {
	switch f {
	case fieldType:
		return "type"
	case fieldID:
		return "id"
	case fieldName:
		return "name"
	case fieldToolUseID:
		return "tool_use_id"
	case fieldDispatch:
		return "dispatch"
	case fieldInput:
		return "input"
	case fieldContent:
		return "content"
	case fieldIsError:
		return "is_error"
	}
	return ""
}

// blockField returns the field the raw (still escaped) key feeds, matched
// as encoding/json matches struct fields: the unescaped key equal to a
// field's name, or else equal to it under Unicode case folding.
func blockField(raw []byte) int {
	key := raw
	if bytes.IndexByte(raw, '\\') >= 0 {
		var buf [32]byte
		key, _ = rawjson.AppendUnescaped(buf[:0], raw)
	}
	switch string(key) {
	case "type":
		return fieldType
	case "id":
		return fieldID
	case "name":
		return fieldName
	case "input":
		return fieldInput
	case "tool_use_id":
		return fieldToolUseID
	case "content":
		return fieldContent
	case "is_error":
		return fieldIsError
	case "dispatch":
		return fieldDispatch
	}
	if len(key) < len("id") || len(key) > utf8.UTFMax*len("tool_use_id") {
		return fieldNone
	}
	for f := 0; f < fieldNone; f++ {
		if foldEqual(key, blockFieldName(f)) {
			return f
		}
	}
	return fieldNone
}

// foldEqual reports whether key equals name (lower-case ASCII) when both
// are case-folded rune by rune, as encoding/json folds names: so "Type",
// "TYPE" and "diſpatch" (long s) match.
func foldEqual(key []byte, name string) bool {
	j := 0
	for i := 0; i < len(key); j++ {
		if j == len(name) {
			return false
		}
		r, n := upper(rune(key[i])), 1
		if key[i] >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(key[i:])
			r = foldRune(r)
		}
		i += n
		if r != upper(rune(name[j])) {
			return false
		}
	}
	return j == len(name)
}

func upper(r rune) rune {
	if 'a' <= r && r <= 'z' {
		return r - 'a' + 'A'
	}
	return r
}

// foldRune returns the smallest rune that folds to the same as r.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// idState is what a block's ID points to.
type idState uint8

const (
	idNil    idState = iota
	idString         // the string in pending.str[fieldID]
	idEmpty          // "": an id of the wrong JSON type still allocates it
)

// pending is what blocks holds of one block's string fields until it
// decodes all of them into one string.
type pending struct {
	str    [numStr][]byte // raw string literals, by field
	lo, hi [numStr]int    // where each is in the decoded text
	id     idState
}

// blocks decodes content as a block array; a string or anything else is
// not an array and yields ok=false. JSON null is an empty array. It sets
// each block's Raw, Input and Content to slices of content, with no spare
// capacity.
func blocks(content json.RawMessage) ([]baton.Block, bool) {
	i := rawjson.SkipSpace(content, 0)
	if i == len(content) || content[i] != '[' && content[i] != 'n' || !rawjson.Valid(content) {
		return nil, false
	}
	n := 0
	_ = rawjson.EachElement(content, func([]byte) { n++ }) // null has none
	out := make([]baton.Block, n)
	var stack [8]pending
	pend := stack[:0]
	if n > len(stack) {
		pend = make([]pending, 0, n)
	}
	_ = rawjson.EachElement(content, func(e []byte) {
		pend = append(pend, pending{})
		decodeBlock(e, &out[len(pend)-1], &pend[len(pend)-1])
	})

	setStrings(out, pend)
	return out, true
}

// setStrings sets the string fields of bs from what decodeBlock left in
// pend: a well-known value as a constant, the others decoded into one
// buffer made into one string that they share.
func setStrings(bs []baton.Block, pend []pending) {
	var buf [512]byte
	text := buf[:0]
	ids := 0
	for k := range pend {
		p, b := &pend[k], &bs[k]
		if p.id != idNil {
			ids++
		}
		if p.id != idString {
			p.str[fieldID] = nil
		}
		if raw := p.str[fieldType]; raw != nil {
			if b.Type = knownType(raw); b.Type != "" {
				p.str[fieldType] = nil
			}
		}
		if raw := p.str[fieldDispatch]; raw != nil {
			if b.Dispatch = knownDispatch(raw); b.Dispatch != "" {
				p.str[fieldDispatch] = nil
			}
		}
		for f, raw := range p.str {
			if raw != nil {
				p.lo[f] = len(text)
				text, _ = rawjson.AppendUnquoted(text, raw)
				p.hi[f] = len(text)
			}
		}
	}
	s := string(text)
	var idv []string
	if ids > 0 {
		idv = make([]string, 0, ids)
	}
	for k := range pend {
		p, b := &pend[k], &bs[k]
		str := func(f int) string { return s[p.lo[f]:p.hi[f]] }
		if p.str[fieldType] != nil {
			b.Type = str(fieldType)
		}
		if p.str[fieldName] != nil {
			b.Name = str(fieldName)
		}
		if p.str[fieldToolUseID] != nil {
			b.ToolUseID = str(fieldToolUseID)
		}
		if p.str[fieldDispatch] != nil {
			b.Dispatch = baton.Dispatch(str(fieldDispatch))
		}
		switch p.id {
		case idString:
			idv = append(idv, str(fieldID))
			b.ID = &idv[len(idv)-1]
		case idEmpty:
			idv = append(idv, "")
			b.ID = &idv[len(idv)-1]
		}
	}
}

// decodeBlock decodes elem (valid JSON) into b as encoding/json would
// unmarshal it into a zero baton.Block, except that string fields are left in p.
// A value of the wrong JSON type leaves its field as it was (but makes ID
// point to ""), null leaves a field as it was but sets ID to nil, and of
// repeated keys the last wins.
func decodeBlock(elem []byte, b *baton.Block, p *pending) {
	b.Raw = elem
	if elem[0] != '{' {
		return // not an object: a typeless block
	}
	_ = rawjson.EachMember(elem, func(k, v []byte) {
		switch f := blockField(k); f {
		case fieldNone:
		case fieldInput:
			b.Input = v
		case fieldContent:
			b.Content = v
		case fieldIsError:
			switch v[0] {
			case 't':
				b.IsError = true
			case 'f':
				b.IsError = false
			}
		case fieldID:
			switch {
			case v[0] == '"':
				p.str[fieldID], p.id = v, idString
			case v[0] == 'n':
				p.id = idNil
			case p.id == idNil:
				p.id = idEmpty
			}
		default:
			if v[0] == '"' {
				p.str[f] = v
			}
		}
	})
}

// knownType returns the common block type the string literal raw holds,
// without allocating, or "".
func knownType(raw []byte) string {
	switch string(raw) {
	case `"text"`:
		return "text"
	case `"tool_use"`:
		return "tool_use"
	case `"tool_result"`:
		return "tool_result"
	case `"thinking"`:
		return "thinking"
	case `"redacted_thinking"`:
		return "redacted_thinking"
	case `"image"`:
		return "image"
	case `"document"`:
		return "document"
	}
	return ""
}

// knownDispatch is knownType for dispatch tags.
func knownDispatch(raw []byte) baton.Dispatch {
	switch string(raw) {
	case `"client"`:
		return baton.DispatchClient
	case `"mcp"`:
		return baton.DispatchMCP
	case `"sandbox"`:
		return baton.DispatchSandbox
	case `"subagent"`:
		return baton.DispatchSubagent
	case `"executor"`:
		return baton.DispatchExecutor
	case `"registered"`:
		return baton.DispatchRegistered
	}
	return ""
}

// member is one member of an object: its unescaped key and raw value.
type member struct {
	key, val []byte
}

// setKey returns obj (a JSON object) with key set to value, or removed
// when value is nil. Non-objects are returned unchanged, and so is obj
// when there is nothing to remove. Otherwise the result is what
// json.Marshal makes of obj decoded as a map[string]json.RawMessage: keys
// sorted, the last of repeated keys kept, values compacted, HTML escaped.
func setKey(obj json.RawMessage, key string, value any) json.RawMessage {
	i := rawjson.SkipSpace(obj, 0)
	if i == len(obj) || obj[i] != '{' || !rawjson.Valid(obj) {
		return obj
	}
	var stack [16]member
	ms := stack[:0]
	var keys []byte // unescaped keys, rarely needed
	_ = rawjson.EachMember(obj, func(k, v []byte) {
		if bytes.IndexByte(k, '\\') >= 0 || !utf8.Valid(k) {
			start := len(keys)
			keys, _ = rawjson.AppendUnescaped(keys, k)
			k = keys[start:len(keys):len(keys)]
		}
		ms = append(ms, member{k, v})
	})
	if value == nil && !slices.ContainsFunc(ms, func(m member) bool { return string(m.key) == key }) {
		return obj // nothing to remove
	}
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	w := 0
	for r := range ms {
		if r+1 < len(ms) && bytes.Equal(ms[r].key, ms[r+1].key) {
			continue // a later value wins
		}
		ms[w] = ms[r]
		w++
	}
	ms = ms[:w]
	at := 0
	for at < len(ms) && string(ms[at].key) < key {
		at++
	}
	found := at < len(ms) && string(ms[at].key) == key

	var val []byte // value, unless a string
	s, isString := value.(string)
	switch {
	case value == nil:
		ms = slices.Delete(ms, at, at+1)
	case !isString:
		val, _ = json.Marshal(value)
		if val == nil {
			val = []byte("null")
		}
	}
	out := make([]byte, 0, len(obj)+len(key)+len(s)+len(val)+8)
	out = append(out, '{')
	for j := 0; j <= len(ms); j++ {
		if j == at && value != nil {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = rawjson.AppendString(out, key, true)
			out = append(out, ':')
			if isString {
				out = rawjson.AppendString(out, s, true)
			} else {
				out = rawjson.AppendCompact(out, val, true)
			}
			if found {
				continue // replaced ms[j]
			}
		}
		if j == len(ms) {
			break
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = rawjson.AppendString(out, ms[j].key, true)
		out = append(out, ':')
		out = rawjson.AppendCompact(out, ms[j].val, true)
	}
	return append(out, '}')
}

// mapToolUses rewrites every tool_use block of content with f. The result
// is json.Marshal's encoding of the blocks as json.RawMessages (compacted,
// HTML escaped), nil when f returned invalid JSON, and content itself when
// it holds no tool_use block or is not an array.
func mapToolUses(content json.RawMessage, f func(b baton.Block) json.RawMessage) json.RawMessage {
	bs, ok := blocks(content)
	if !ok {
		return content
	}
	changed := false
	size := 2
	for i := range bs {
		if bs[i].Type == baton.BlockToolUse {
			bs[i].Raw = f(bs[i])
			changed = true
		}
		size += len(bs[i].Raw) + len(",null")
	}
	if !changed {
		return content
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, b := range bs {
		if i > 0 {
			out = append(out, ',')
		}
		switch {
		case b.Raw == nil:
			out = append(out, "null"...)
		case b.Type == baton.BlockToolUse && !rawjson.Valid(b.Raw):
			return nil
		default:
			out = rawjson.AppendCompact(out, b.Raw, true)
		}
	}
	return append(out, ']')
}

// concatContent joins two contents as one block array: a block array's
// blocks, a non-empty string as a text block, nothing for anything else.
func concatContent(a, b json.RawMessage) json.RawMessage {
	out := make([]byte, 0, len(a)+len(b)+len(`[{"text":,"type":"text"},{"text":,"type":"text"}]`))
	out = append(out, '[')
	sep := func() {
		if len(out) > 1 {
			out = append(out, ',')
		}
	}
	for _, c := range [...]json.RawMessage{a, b} {
		i := rawjson.SkipSpace(c, 0)
		if i == len(c) || c[i] != '[' && c[i] != '"' || !rawjson.Valid(c) {
			continue
		}
		if c[i] == '[' {
			_ = rawjson.EachElement(c, func(e []byte) {
				sep()
				out = rawjson.AppendCompact(out, e, true)
			})
			continue
		}
		end, _ := rawjson.SkipString(c, i)
		var buf [256]byte
		text, _ := rawjson.AppendUnquoted(buf[:0], c[i:end])
		if len(text) > 0 {
			sep()
			out = append(out, `{"text":`...)
			out = rawjson.AppendString(out, text, true)
			out = append(out, `,"type":"text"}`...)
		}
	}
	return append(out, ']')
}
