package sandbox

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCapBuffer: a stream cut under the driver's cap ends with a note
// saying how many bytes are missing, kept bytes giving way to it so the
// whole stays within the cap, on a UTF-8 boundary; an exec's own limit
// gives the bare cut.
func TestCapBuffer(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		note   bool
		writes []string
		want   string
	}{
		{"fits", 40, true, []string{"abc"}, "abc"},
		{"exactly full", 40, true, []string{strings.Repeat("x", 40)}, strings.Repeat("x", 40)},
		{"cut", 40, true, []string{strings.Repeat("x", 100)}, "xxxxxx\n[output truncated: 94 more bytes]"},
		{"cut across writes", 40, true, []string{strings.Repeat("x", 30), strings.Repeat("x", 30), strings.Repeat("x", 40)},
			"xxxxxx\n[output truncated: 94 more bytes]"},
		// Making room for a note of 2 digits leaves 3: one more byte goes.
		{"count gains a digit", 40, true, []string{strings.Repeat("x", 135)}, "xxxxx\n[output truncated: 130 more bytes]"},
		// A kept line end needs no newline before the note.
		{"after a line", 40, true, []string{"abcde\n" + strings.Repeat("y", 100)}, "abcde\n[output truncated: 100 more bytes]"},
		// "é" is 2 bytes: a cut inside one drops it whole, and counts it.
		{"utf-8", 40, true, []string{"a" + strings.Repeat("é", 50)}, "aéé\n[output truncated: 96 more bytes]"},
		{"everything gives way", 34, true, []string{strings.Repeat("x", 200)}, "[output truncated: 200 more bytes]"},
		{"no room for the note", 10, true, []string{strings.Repeat("é", 20)}, "ééééé"},
		{"own limit", 3, false, []string{"aaé and more"}, "aa"},
		{"own limit, fits", 40, false, []string{"abc"}, "abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &capBuffer{max: tc.max, note: tc.note}
			total := 0
			for _, w := range tc.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				total += len(w)
			}
			got := c.String()
			if got != tc.want {
				t.Errorf("String() = %q\nwant %q", got, tc.want)
			}
			if len(got) > tc.max {
				t.Errorf("%d bytes, over the cap of %d", len(got), tc.max)
			}
			if cut := total > tc.max; (c.dropped > 0) != cut {
				t.Errorf("dropped %d of %d bytes with cap %d", c.dropped, total, tc.max)
			}
		})
	}
}

// TestOutputBuffers notes cuts only under the driver's cap.
func TestOutputBuffers(t *testing.T) {
	for _, tc := range []struct {
		limit, driverCap, max int
		note                  bool
	}{
		{0, 0, DefaultOutputCap, true},
		{0, 1000, 1000, true},
		{-1, 1000, 1000, true},
		{65536, 1000, 65536, false},
	} {
		out, errs := outputBuffers(tc.limit, tc.driverCap)
		for _, b := range []*capBuffer{out, errs} {
			if b.max != tc.max || b.note != tc.note {
				t.Errorf("outputBuffers(%d, %d) = cap %d note %v, want %d %v", tc.limit, tc.driverCap, b.max, b.note, tc.max, tc.note)
			}
		}
	}
}

// FuzzCapBuffer checks the cut's invariants on any output: the text is a
// prefix of the output (whole characters of valid UTF-8) followed, after
// a cut, by a note counting exactly the bytes left out, all within the
// cap.
func FuzzCapBuffer(f *testing.F) {
	f.Add([]byte(strings.Repeat("x", 100)), 40, 7)
	f.Add([]byte("abcde\n"+strings.Repeat("y", 100)), 40, 100)
	f.Add([]byte("a"+strings.Repeat("é", 50)), 40, 3)
	f.Add([]byte(strings.Repeat("日本", 100)), 64, 5)
	f.Add([]byte("short"), 40, 1)
	f.Fuzz(func(t *testing.T, in []byte, max, chunk int) {
		if max < 1 || max > 1<<16 || chunk < 1 {
			t.Skip()
		}
		c := &capBuffer{max: max, note: true}
		for rest := in; len(rest) > 0; {
			n := min(chunk, len(rest))
			c.Write(rest[:n])
			rest = rest[n:]
		}
		got := c.String()
		if len(in) <= max {
			if got != string(in) {
				t.Fatalf("uncut output changed: %q", got)
			}
			return
		}
		noteFor := func(n int) string { return "[output truncated: " + strconv.Itoa(n) + " more bytes]" }
		kept := got
		if len(noteFor(len(in))) <= max { // room for a note
			i := strings.LastIndex(got, "[output truncated: ")
			if i < 0 {
				t.Fatalf("no note on a cut of %d bytes to %d: %q", len(in), max, got)
			}
			// The note starts a line: kept is what precedes it, or that but
			// the newline before it, added after a kept partial line.
			kept = got[:i]
			if sep, ok := strings.CutSuffix(kept, "\n"); ok && sep != "" && !strings.HasSuffix(sep, "\n") &&
				got[i:] == noteFor(len(in)-len(sep)) {
				kept = sep
			}
			if i > 0 && got[i-1] != '\n' {
				t.Fatalf("note not on a line of its own: %q", got)
			}
			if want := noteFor(len(in) - len(kept)); got[i:] != want {
				t.Fatalf("note %q, want %q", got[i:], want)
			}
		}
		if len(got) > max {
			t.Fatalf("%d bytes, over the cap of %d", len(got), max)
		}
		if !strings.HasPrefix(string(in), kept) {
			t.Fatalf("%q is not a prefix of the output", kept)
		}
		if utf8.Valid(in) && !utf8.ValidString(kept) {
			t.Fatalf("cut inside a character: %q", kept)
		}
	})
}
