package rawjson

import "unicode/utf8"

// maxDepth is how deeply encoding/json lets arrays and objects nest.
const maxDepth = 10000

// Valid reports whether b is one JSON value, with optional surrounding
// whitespace, as encoding/json's Valid does (arrays and objects nest at
// most 10000 deep) but strictly: invalid UTF-8 inside a string makes it
// invalid, as RFC 8259 requires and serde_json decides, where encoding/json
// would accept it. Valid is therefore json.Valid(b) && utf8.Valid(b): bytes
// of 0x80 and above are invalid JSON anywhere outside strings. Escapes are
// not UTF-8 and are checked only for their syntax, as encoding/json does:
// a lone surrogate escape such as "\ud800" is valid.
func Valid(b []byte) bool {
	i, ok := validValue(b, SkipSpace(b, 0), 0)
	return ok && SkipSpace(b, i) == len(b)
}

// validValue returns the index after the valid value at b[i]; depth is the
// number of arrays and objects open around it.
func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '{':
		return validContainer(b, i, depth, '}')
	case '[':
		return validContainer(b, i, depth, ']')
	case '"':
		return validString(b, i)
	case 't':
		return validWord(b, i, "true")
	case 'f':
		return validWord(b, i, "false")
	case 'n':
		return validWord(b, i, "null")
	}
	return validNumber(b, i)
}

// validContainer validates the object (closer '}') or array (']') at b[i].
func validContainer(b []byte, i, depth int, closer byte) (int, bool) {
	if depth >= maxDepth {
		return 0, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1, true
	}
	for {
		var ok bool
		if closer == '}' {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			if i, ok = validString(b, i); !ok {
				return 0, false
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			i = SkipSpace(b, i+1)
		}
		if i, ok = validValue(b, i, depth+1); !ok {
			return 0, false
		}
		i = SkipSpace(b, i)
		switch {
		case i >= len(b):
			return 0, false
		case b[i] == ',':
			i = SkipSpace(b, i+1)
		case b[i] == closer:
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// plain marks the bytes a string literal holds as they are with nothing
// to check: printable ASCII but the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validString validates the string literal at b[i]: no control bytes,
// only the escapes JSON defines, and valid UTF-8. Plain ASCII costs one
// table look a byte; a string with a byte of 0x80 or above has the rest
// from there checked as UTF-8 once, at its end (a quote or a backslash is
// never part of a UTF-8 sequence, so the escapes in that stretch are
// plain ASCII to utf8.Valid).
func validString(b []byte, i int) (int, bool) {
	high := -1 // where the first byte of 0x80 or above is
	for i++; i < len(b); {
		c := b[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, high < 0 || utf8.Valid(b[high:i])
		case c >= utf8.RuneSelf:
			if high < 0 {
				high = i
			}
			i++
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b[i+2:]); !ok {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		default: // a control byte
			return 0, false
		}
	}
	return 0, false
}

func validWord(b []byte, i int, word string) (int, bool) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return 0, false
	}
	return i + len(word), true
}

// validNumber validates the number at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// AppendCompact appends the valid JSON text src to dst without its
// insignificant whitespace. With html, it also escapes <, > and & and the
// separators U+2028 and U+2029 inside strings, as encoding/json does when
// it marshals a json.RawMessage. The output for invalid src is undefined.
func AppendCompact(dst, src []byte, html bool) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case ' ', '\t', '\n', '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		case '"':
			if !html {
				end, ok := SkipString(src, i)
				if !ok {
					return append(dst, src[start:]...)
				}
				i = end - 1
				continue
			}
			for i++; i < len(src) && src[i] != '"'; i++ {
				switch c := src[i]; {
				case c == '\\':
					i++ // the escaped byte is plain ASCII
				case c == '<' || c == '>' || c == '&':
					dst = append(dst, src[start:i]...)
					dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
					start = i + 1
				case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
					dst = append(dst, src[start:i]...)
					dst = append(dst, '\\', 'u', '2', '0', '2', hex[src[i+2]&0xF])
					i += 2
					start = i + 1
				}
			}
		}
	}
	return append(dst, src[start:]...)
}
