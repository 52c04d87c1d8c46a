package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/baton-engine/baton"
)

// FuzzCursor checks that a cursor from a query string either parses as
// the integer it spells or is refused with the wire's bad_request message.
func FuzzCursor(f *testing.F) {
	for _, seed := range []string{"", "0", "42", "-1", "+7", "abc", "1.5", " 1", "9223372036854775808", "\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, c string) {
		n, err := parseCursor(c)
		if err != nil {
			wantCode(t, err, baton.ECodeBadRequest, fmt.Sprintf("invalid cursor: %q", c))
			return
		}
		if c == "" {
			if n != 0 {
				t.Fatalf("empty cursor = %d", n)
			}
			return
		}
		if want, perr := strconv.ParseInt(c, 10, 64); perr != nil || want != n {
			t.Fatalf("parseCursor(%q) = %d, want %d (%v)", c, n, want, perr)
		}
	})
}

// FuzzRawList checks that allowed_tools elements survive the stored form
// byte for byte (less surrounding JSON whitespace), and that invalid
// elements are refused instead of corrupting the list.
func FuzzRawList(f *testing.F) {
	f.Add([]byte(`"bash"`), []byte(`{ "a" : [1, 2] }`))
	f.Add([]byte(`42`), []byte(` null `))
	f.Add([]byte(`{`), []byte(`"ok"`))
	f.Add([]byte(``), []byte(`"x",1`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		in := []json.RawMessage{a, b}
		s, err := encodeRaw(in)
		if err != nil {
			if json.Valid(a) && json.Valid(b) || len(a) == 0 && json.Valid(b) || len(b) == 0 && json.Valid(a) {
				t.Fatalf("encodeRaw refused valid elements %q, %q: %v", a, b, err)
			}
			return
		}
		out, err := decodeRaw(s)
		if err != nil {
			t.Fatalf("stored form %q does not decode: %v", s, err)
		}
		if len(out) != 2 {
			t.Fatalf("stored form %q decodes to %d elements", s, len(out))
		}
		for i, raw := range in {
			want := bytes.Trim(raw, " \t\r\n")
			if len(raw) == 0 {
				want = []byte("null")
			}
			if !bytes.Equal(out[i], want) {
				t.Fatalf("element %d: stored %q, read back %q", i, raw, out[i])
			}
		}
	})
}
