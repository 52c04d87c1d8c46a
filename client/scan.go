package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// This file holds a small JSON decoder for the hot path of every stream.
// session.event notifications and sendMessage results carry whole
// provider requests; encoding/json went over them several times (validate,
// decode, validate again for each RawMessage and UnmarshalJSON level) and
// copied them at each level. The decoder reads a text in place, scanning
// each byte once: a caller pulls the members it wants and the rest are
// validated as they are skipped. It accepts exactly encoding/json's
// grammar, nesting limit included, and reads values by its rules: keys
// match fields exactly or else case-insensitively, null leaves a field as
// it was, the last of duplicate keys wins, invalid UTF-8 in a decoded
// string becomes U+FFFD.

// maxDepth is encoding/json's bound on nested arrays and objects.
const maxDepth = 10000

// syntaxError is invalid JSON text.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.off, e.msg)
}

func bad(off int, msg string) error { return &syntaxError{off: off, msg: msg} }

// typeError is a valid value of the wrong type for its field.
type typeError struct {
	field, want, got string
}

func (e *typeError) Error() string {
	return fmt.Sprintf("%s: cannot decode %s into %s", e.field, e.got, e.want)
}

// decoder reads one JSON text in place.
type decoder struct {
	b     []byte
	i     int
	depth int // enclosing arrays and objects
}

func (d *decoder) space() {
	for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\n' || d.b[d.i] == '\r' || d.b[d.i] == '\t') {
		d.i++
	}
}

// peek skips space and returns the next byte, 0 at the end.
func (d *decoder) peek() byte {
	d.space()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

// end checks that only space is left.
func (d *decoder) end() error {
	if d.space(); d.i != len(d.b) {
		return bad(d.i, "data after the top-level value")
	}
	return nil
}

// raw validates the next value and returns its text.
func (d *decoder) raw() ([]byte, error) {
	d.space()
	start := d.i
	if err := d.value(); err != nil {
		return nil, err
	}
	return d.b[start:d.i], nil
}

// value validates the value at d.i (space skipped) and moves past it.
func (d *decoder) value() error {
	if d.i >= len(d.b) {
		return bad(d.i, "unexpected end of input")
	}
	switch d.b[d.i] {
	case '"':
		return d.string()
	case '{':
		return d.object(nil)
	case '[':
		return d.array(nil)
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	return d.number()
}

func (d *decoder) literal(lit string) error {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		return bad(d.i, "invalid literal")
	}
	d.i += len(lit)
	return nil
}

// string moves past the string literal at d.b[d.i] == '"'.
func (d *decoder) string() error {
	b, i := d.b, d.i+1
	for {
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		switch {
		case i >= len(b):
			return bad(d.i, "unterminated string")
		case b[i] == '"':
			d.i = i + 1
			return nil
		case b[i] < 0x20:
			return bad(i, "control character in string")
		case i+1 >= len(b):
			return bad(i, "unterminated string")
		}
		switch b[i+1] { // after a backslash
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if !hex4(b[i+2:]) {
				return bad(i, `invalid \u escape`)
			}
			i += 6
		default:
			return bad(i, "invalid escape")
		}
	}
}

// hex4 reports whether b starts with four hex digits.
func hex4(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	for _, c := range b[:4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// number moves past the number at d.i.
func (d *decoder) number() error {
	b, i := d.b, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return bad(d.i, "invalid value")
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || b[i+1] < '0' || b[i+1] > '9' {
			return bad(i, "invalid number")
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return bad(i, "invalid number")
		}
		i = digits(b, i)
	}
	d.i = i
	return nil
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// object reads the object at d.b[d.i] == '{'. For each member it calls
// fn with the raw key (quotes included); fn must read the value, with
// raw, str, object or another reader. A nil fn skips the values.
func (d *decoder) object(fn func(key []byte) error) error {
	if d.depth++; d.depth > maxDepth {
		return bad(d.i, "exceeded max depth")
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		d.depth--
		return nil
	}
	for {
		if d.peek() != '"' {
			return bad(d.i, "want an object key")
		}
		start := d.i
		if err := d.string(); err != nil {
			return err
		}
		key := d.b[start:d.i]
		if d.peek() != ':' {
			return bad(d.i, "want ':' after an object key")
		}
		d.i++
		d.space()
		if err := d.member(fn, key); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return nil
		default:
			return bad(d.i, "want ',' or '}' in an object")
		}
	}
}

func (d *decoder) member(fn func(key []byte) error, key []byte) error {
	if fn == nil {
		return d.value()
	}
	return fn(key)
}

// array is object for arrays: fn reads each element.
func (d *decoder) array(fn func() error) error {
	if d.depth++; d.depth > maxDepth {
		return bad(d.i, "exceeded max depth")
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		d.depth--
		return nil
	}
	for {
		d.space()
		var err error
		if fn == nil {
			err = d.value()
		} else {
			err = fn()
		}
		if err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return nil
		default:
			return bad(d.i, "want ',' or ']' in an array")
		}
	}
}

// read runs fn, which reads the next value, and returns that value's
// text. When fn fails, the value is validated on its own: err is then
// its syntax error, or else fn's error is returned as readErr, the value
// being well-formed but not what fn wanted.
func (d *decoder) read(fn func() error) (raw []byte, readErr, err error) {
	d.space()
	start, depth := d.i, d.depth
	if readErr = fn(); readErr != nil {
		d.i, d.depth = start, depth
		if err := d.value(); err != nil {
			return nil, nil, err
		}
	}
	return d.b[start:d.i], readErr, nil
}

// expect checks that the next value is null or starts with open ('{' or
// '['). It reports null as such; another value is validated and skipped
// and its type returned as a *typeError.
func (d *decoder) expect(open byte, field, want string) (null bool, err error) {
	switch c := d.peek(); {
	case c == open:
		return false, nil
	case c == 'n':
		return true, d.value()
	}
	return false, d.mistyped(field, want)
}

// mistyped validates and skips the next value and returns the error of
// finding it where a want was expected.
func (d *decoder) mistyped(field, want string) error {
	v, err := d.raw()
	if err != nil {
		return err
	}
	got := "a number"
	switch v[0] {
	case '"':
		got = "a string"
	case '{':
		got = "an object"
	case '[':
		got = "an array"
	case 't', 'f':
		got = "a bool"
	}
	return &typeError{field, want, got}
}

// str reads the next value into *dst for field: a string replaces *dst,
// null leaves it, anything else is an error. intern, when not nil,
// returns a shared copy of a string seen before.
func (d *decoder) str(dst *string, field string, intern func([]byte) string) error {
	var start int
	switch d.peek() {
	case 'n':
		return d.value()
	case '"':
		start = d.i
		if err := d.string(); err != nil {
			return err
		}
	default:
		return d.mistyped(field, "a string")
	}
	v := d.b[start+1 : d.i-1]
	if bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return json.Unmarshal(d.b[start:d.i], dst)
	}
	if intern != nil {
		*dst = intern(v)
	} else {
		*dst = string(v)
	}
	return nil
}

// int reads the next value into *dst as encoding/json fills an int: an
// integer literal within range; null leaves it.
func (d *decoder) int(dst *int, field string) error {
	var start int
	switch c := d.peek(); {
	case c == 'n':
		return d.value()
	case c == '-' || '0' <= c && c <= '9':
		start = d.i
		if err := d.number(); err != nil {
			return err
		}
	default:
		return d.mistyped(field, "an int")
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, strconv.IntSize)
	if err != nil {
		return &typeError{field, "an int", "number " + string(d.b[start:d.i])}
	}
	*dst = int(n)
	return nil
}

// field returns the index in names of the raw key (quotes included),
// matched as encoding/json matches struct fields: exactly, else by case
// folding; -1 when none matches.
func field(key []byte, names ...string) int {
	k := key[1 : len(key)-1]
	for i, n := range names {
		if string(k) == n {
			return i
		}
	}
	if bytes.IndexByte(k, '\\') >= 0 || !utf8.Valid(k) {
		var s string
		if json.Unmarshal(key, &s) != nil {
			return -1
		}
		k = []byte(s)
	}
	for i, n := range names {
		if bytes.EqualFold(k, []byte(n)) {
			return i
		}
	}
	return -1
}
