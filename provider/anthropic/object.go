package anthropic

import (
	"bytes"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// This file edits raw JSON objects in place of decoding them into maps, so
// a reassembled message keeps the field order and the unknown fields the
// server sent.

var errObject = errors.New("not a JSON object")

// member is one field to set in an object: Key is plain ASCII, Val valid
// JSON.
type member struct {
	Key string
	Val []byte
}

// eachField calls fn with the raw key (the bytes between the quotes) and
// the raw value of each top-level field of the JSON object obj.
func eachField(obj []byte, fn func(key, val []byte)) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return errObject
		}
		end, ok := skipString(obj, i)
		if !ok {
			return errObject
		}
		key := obj[i+1 : end-1]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return errObject
		}
		i = skipSpace(obj, i+1)
		end, ok = skipValue(obj, i)
		if !ok {
			return errObject
		}
		fn(key, obj[i:end])
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return errObject
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return nil
		default:
			return errObject
		}
	}
}

// field returns the raw value of obj's top-level field key, or nil.
func field(obj []byte, key string) []byte {
	var v []byte
	_ = eachField(obj, func(k, val []byte) {
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
	err := eachField(obj, func(key, val []byte) {
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
		dst = appendString(dst, m.Key)
		dst = append(dst, ':')
		dst = append(dst, m.Val...)
	}
	return append(dst, '}'), nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
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
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' &&
		b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i, i > start
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func appendString[T string | []byte](dst []byte, s T) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// appendUnquoted appends the text of the JSON string literal s (quotes
// included) to dst, decoding escapes as encoding/json does: a lone
// surrogate becomes U+FFFD. It reports false when s is not a string
// literal.
func appendUnquoted(dst, s []byte) ([]byte, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return dst, false
	}
	s = s[1 : len(s)-1]
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return appendValid(dst, s), true
		}
		dst = appendValid(dst, s[:i])
		s = s[i:]
		if len(s) < 2 {
			return dst, false
		}
		switch c := s[1]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s[2:])
			if !ok {
				return dst, false
			}
			s = s[4:] // the 2 bytes of "\\u" go below
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if len(s) >= 8 && s[2] == '\\' && s[3] == 'u' {
					r2, ok = hex4(s[4:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					s = s[6:]
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
		s = s[2:]
	}
	return dst, true
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendValid appends s with each byte that is not part of valid UTF-8
// replaced by U+FFFD.
func appendValid(dst, s []byte) []byte {
	if utf8.Valid(s) {
		return append(dst, s...)
	}
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[:n]...)
		}
		s = s[n:]
	}
	return dst
}
