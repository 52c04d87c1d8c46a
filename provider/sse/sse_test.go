package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

type ev struct{ Type, ID, Data string }

// decodeAll returns every event of r and the error that ended the stream.
func decodeAll(r io.Reader, max int) ([]ev, error) {
	d := NewDecoder(r)
	d.SetMax(max)
	var out []ev
	for {
		e, err := d.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev{e.Type, e.ID, string(e.Data)})
	}
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"empty", "", nil},
		{"one", "data: hi\n\n", []ev{{"message", "", "hi"}}},
		{"named", "event: ping\ndata: {}\n\n", []ev{{"ping", "", "{}"}}},
		{"multi-line data", "data: a\ndata: b\ndata\n\n", []ev{{"message", "", "a\nb\n"}}},
		{"no space after colon", "data:x\n\n", []ev{{"message", "", "x"}}},
		{"only one space stripped", "data:  x\n\n", []ev{{"message", "", " x"}}},
		{"empty data line dispatches empty data", "data:\n\n", []ev{{"message", "", ""}}},
		{"no data is no event", "event: x\n\ndata: y\n\n", []ev{{"message", "", "y"}}},
		{"comments ignored", ": keep-alive\n:\ndata: y\n\n", []ev{{"message", "", "y"}}},
		{"unknown fields ignored", "retry: 10\nfoo: bar\ndata: y\n\n", []ev{{"message", "", "y"}}},
		{"CRLF", "event: a\r\ndata: 1\r\n\r\n", []ev{{"a", "", "1"}}},
		{"lone CR", "event: a\rdata: 1\r\rdata: 2\r\r", []ev{{"a", "", "1"}, {"message", "", "2"}}},
		{"mixed endings", "data: 1\r\n\ndata: 2\r\r\n", []ev{{"message", "", "1"}, {"message", "", "2"}}},
		{"BOM skipped", "\xEF\xBB\xBFdata: 1\n\n", []ev{{"message", "", "1"}}},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
			[]ev{{"message", "7", "a"}, {"message", "7", "b"}, {"message", "", "c"}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n",
			[]ev{{"message", "1", "a"}, {"message", "1", "b"}}},
		{"type resets after dispatch", "event: a\ndata: 1\n\ndata: 2\n\n",
			[]ev{{"a", "", "1"}, {"message", "", "2"}}},
		{"empty event field means message", "event:\ndata: 1\n\n", []ev{{"message", "", "1"}}},
		{"incomplete event discarded", "data: 1\n\ndata: 2\n", []ev{{"message", "", "1"}}},
		{"unterminated line discarded", "data: 1\n\ndata: {\"partial", []ev{{"message", "", "1"}}},
		{"field without colon", "data\n\n", []ev{{"message", "", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tt.in)},
				{"byte", iotest.OneByteReader(strings.NewReader(tt.in))},
			} {
				got, err := decodeAll(r.r, DefaultMaxEvent)
				if err != io.EOF {
					t.Fatalf("%s: err = %v, want io.EOF", r.name, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", r.name, diff)
				}
			}
		})
	}
}

func TestDecoderLongLines(t *testing.T) {
	long := strings.Repeat("x", 10000) // longer than the initial buffer
	got, err := decodeAll(strings.NewReader("data: "+long+"\n\n"), DefaultMaxEvent)
	if err != io.EOF || len(got) != 1 || got[0].Data != long {
		t.Fatalf("got %d events, err %v", len(got), err)
	}

	_, err = decodeAll(strings.NewReader("data: "+long+"\n\n"), 1000)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("line over the bound: err = %v, want ErrTooLong", err)
	}
	many := strings.Repeat("data: 0123456789\n", 200) + "\n"
	_, err = decodeAll(strings.NewReader(many), 1000)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("data over the bound: err = %v, want ErrTooLong", err)
	}
}

func TestDecoderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: 1\n\ndata: 2\n"), iotest.ErrReader(boom))
	d := NewDecoder(r)
	if e, err := d.Next(); err != nil || string(e.Data) != "1" {
		t.Fatalf("first event = %q, %v", e.Data, err)
	}
	for range 2 { // sticky
		if _, err := d.Next(); err != boom {
			t.Fatalf("err = %v, want boom", err)
		}
	}
}

// reference is a deliberately naive decoder used as the fuzz oracle.
func reference(in string) []ev {
	in = strings.TrimPrefix(in, "\xEF\xBB\xBF")
	var lines []string
	for {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // the unterminated tail is discarded
		}
		lines = append(lines, in[:i])
		if strings.HasPrefix(in[i:], "\r\n") {
			i++
		}
		in = in[i+1:]
	}
	var out []ev
	var data, typ, id string
	hasData := false
	for _, l := range lines {
		if l == "" {
			if hasData {
				if typ == "" {
					typ = "message"
				}
				out = append(out, ev{typ, id, strings.TrimSuffix(data, "\n")})
			}
			data, typ, hasData = "", "", false
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "data":
			data += value + "\n"
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		}
	}
	return out
}

func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"",
		"data: hi\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
		"data: a\r\ndata: b\r\n\r\n",
		"data: a\rdata: b\r\r",
		"\xEF\xBB\xBFid: 1\ndata\n\n",
		": comment\nretry: 5\ndata: [DONE]\n\n",
		"data: cut",
		"event: x\n\ndata:\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want := reference(in)
		for _, r := range []io.Reader{
			strings.NewReader(in),
			iotest.OneByteReader(strings.NewReader(in)),
			iotest.HalfReader(strings.NewReader(in)),
		} {
			got, err := decodeAll(r, DefaultMaxEvent)
			if err != io.EOF {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events differ from the reference (-want +got):\n%s", diff)
			}
		}
	})
}

func BenchmarkDecoder(b *testing.B) {
	stream := strings.Repeat("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n", 100)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		d := NewDecoder(strings.NewReader(stream))
		for {
			if _, err := d.Next(); err != nil {
				break
			}
		}
	}
}

// A released decoder stops, and the buffer it hands on carries nothing of
// its stream into the next decoder's events.
func TestDecoderRelease(t *testing.T) {
	first := NewDecoder(strings.NewReader("event: a\ndata: one\n\nevent: b\ndata: left unread\n\n"))
	if e, err := first.Next(); err != nil || e.Type != "a" || string(e.Data) != "one" {
		t.Fatalf("first stream: %+v, %v", e, err)
	}
	first.Release()
	first.Release() // idempotent
	if _, err := first.Next(); err == nil || err == io.EOF {
		t.Fatalf("Next after Release: %v, want an error", err)
	}
	got, err := decodeAll(strings.NewReader("data: two\n\n"), DefaultMaxEvent)
	if err != io.EOF || len(got) != 1 || got[0] != (ev{"message", "", "two"}) {
		t.Fatalf("next stream: %+v, %v", got, err)
	}
}
