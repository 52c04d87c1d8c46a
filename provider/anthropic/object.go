package anthropic

import "github.com/baton-engine/baton/internal/rawjson"

// This file edits raw JSON objects in place of decoding them into maps, so
// a reassembled message keeps the field order and the unknown fields the
// server sent.

// member is one field to set in an object: Key is plain ASCII, Val valid
// JSON.
type member struct {
	Key string
	Val []byte
}

// field returns the raw value of obj's top-level field key, or nil.
func field(obj []byte, key string) []byte {
	var v []byte
	_ = rawjson.EachMember(obj, func(k, val []byte) {
		if string(k) == key {
			v = val
		}
	})
	return v
}

// appendPatched appends obj with the fields of set replaced (in place) or
// added (at the end, in set's order). set holds at most 64 members.
func appendPatched(dst, obj []byte, set []member) ([]byte, error) {
	var used uint64
	dst = append(dst, '{')
	first := true
	err := rawjson.EachMember(obj, func(key, val []byte) {
		for j, m := range set {
			if m.Key == string(key) {
				val = m.Val
				used |= 1 << j
				break
			}
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		dst = append(dst, val...)
	})
	if err != nil {
		return dst, err
	}
	for j, m := range set {
		if used&(1<<j) != 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = rawjson.AppendString(dst, m.Key, false)
		dst = append(dst, ':')
		dst = append(dst, m.Val...)
	}
	return append(dst, '}'), nil
}
