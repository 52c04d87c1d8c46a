// Package rawjson walks JSON text without decoding it into Go values: it
// iterates the members of an object and the elements of an array as raw
// byte slices of the input, skips values, decodes and encodes strings, and
// validates and compacts JSON text, with encoding/json's exact rules where
// they matter (string escapes, U+FFFD for invalid UTF-8 and lone
// surrogates, HTML escaping). Validity is encoding/json's made strict:
// Valid also refuses invalid UTF-8 inside strings, which encoding/json
// accepts, so that no such text gets past a decoder that checks with it. It also appends a conversation's messages
// (baton.Message) as request bodies and provider.request payloads carry
// them. It is Baton's one JSON string encoder.
//
// Nothing here uses reflection or allocates beyond the bytes it appends.
// The walkers (EachMember, EachElement, SkipValue, SkipString) trust their
// input to be valid JSON, as checked once by Valid: on other input they
// return an error or meaningless slices, but never panic. The slices they
// hand out point into the input.
package rawjson

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

var (
	errObject = errors.New("not a JSON object")
	errArray  = errors.New("not a JSON array")
)

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipString returns the index after the string literal whose opening
// quote is b[i], and false when it is not closed.
func SkipString(b []byte, i int) (int, bool) {
	// Most strings (keys, tags, ids) are short: a plain loop finds their
	// end sooner than a call to bytes.IndexByte.
	j := i + 1
	for end := min(j+24, len(b)); j < end; j++ {
		switch b[j] {
		case '"':
			return j + 1, true
		case '\\':
			j++
		}
	}
	for j < len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		q := j + k
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
	return 0, false
}

// SkipValue returns the index after the JSON value that starts at b[i],
// and false when there is none.
func SkipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := SkipString(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
		i++
	}
	return i, i > start
}

// EachMember calls fn with the raw key (the bytes between its quotes,
// escapes left as they are) and the raw value of each member of the
// object obj, in order, duplicates included. It fails when obj is not an
// object.
func EachMember(obj []byte, fn func(key, val []byte)) error {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errObject
	}
	i = SkipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return errObject
		}
		end, ok := SkipString(obj, i)
		if !ok {
			return errObject
		}
		key := obj[i+1 : end-1 : end-1]
		i = SkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return errObject
		}
		i = SkipSpace(obj, i+1)
		end, ok = SkipValue(obj, i)
		if !ok {
			return errObject
		}
		fn(key, obj[i:end:end])
		i = SkipSpace(obj, end)
		if i >= len(obj) {
			return errObject
		}
		switch obj[i] {
		case ',':
			i = SkipSpace(obj, i+1)
		case '}':
			return nil
		default:
			return errObject
		}
	}
}

// EachElement calls fn with the raw bytes of each element of the array
// arr, in order. It fails when arr is not an array.
func EachElement(arr []byte, fn func(elem []byte)) error {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errArray
	}
	i = SkipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		end, ok := SkipValue(arr, i)
		if !ok {
			return errArray
		}
		fn(arr[i:end:end])
		i = SkipSpace(arr, end)
		if i >= len(arr) {
			return errArray
		}
		switch arr[i] {
		case ',':
			i = SkipSpace(arr, i+1)
		case ']':
			return nil
		default:
			return errArray
		}
	}
}

// Kind returns the first byte of the JSON value b, which names its type:
// one of { [ " t f n, a digit or '-' for a number, or 0 when b holds no
// value.
func Kind(b []byte) byte {
	if i := SkipSpace(b, 0); i < len(b) {
		return b[i]
	}
	return 0
}

// AppendKey appends the text of a raw object key (the bytes between its
// quotes, as EachMember hands them out), as encoding/json reads it:
// escapes decoded, invalid UTF-8 as U+FFFD. A key without either is
// copied as it is.
func AppendKey(dst, raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return append(dst, raw...)
	}
	dst, _ = AppendUnescaped(dst, raw)
	return dst
}

// Member returns the raw value of the member of object obj whose key,
// unescaped, is key (the last one when the key repeats), or nil when obj
// is not an object or has no such member.
func Member(obj []byte, key string) []byte {
	var found, buf []byte
	_ = EachMember(obj, func(k, val []byte) {
		if buf = AppendKey(buf[:0], k); string(buf) == key {
			found = val
		}
	})
	return found
}
