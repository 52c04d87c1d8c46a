package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestReadFrames(t *testing.T) {
	in := `{"jsonrpc":"2.0","method":"session.event","params":{"id":"evt_1"}}` + "\n" +
		"\n  \r\n" + // blank lines are skipped
		`{"jsonrpc":"2.0","error":{"code":-32000,"message":"lagged; reconnect with since_event_id"}}` + "\r\n" +
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"lagged but with an id"}}` + "\n" +
		`{"jsonrpc":"2.0","id":7,"result":null}` + "\n" +
		`{"jsonrpc":"2.0","id":8,"result":{"ended":true}}` // no final newline
	fr := newFrameReader(iotest.OneByteReader(strings.NewReader(in)), 0)
	var got []frameKind
	for {
		f, err := fr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		k, _ := f.kind()
		got = append(got, k)
	}
	want := []frameKind{kindNote, kindLagged, kindError, kindError, kindResult, kindResult}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
}

func TestReadFrameLimit(t *testing.T) {
	line := `{"method":"m","params":"` + strings.Repeat("x", 100) + `"}`
	// Exactly at the limit passes, with or without a newline.
	for _, in := range []string{line + "\n", line} {
		if _, err := newFrameReader(strings.NewReader(in), len(line)).next(); err != nil {
			t.Errorf("frame of exactly the limit: %v", err)
		}
	}
	// One byte over fails, with or without a newline, even past the
	// bufio buffer size.
	for _, in := range []string{line + "\n", line, strings.Repeat(" ", 64<<10) + line} {
		if _, err := newFrameReader(strings.NewReader(in), len(line)-1).next(); !errors.Is(err, errFrameTooLarge) {
			t.Errorf("frame over the limit: err = %v", err)
		}
	}
}

func TestReadFrameMalformed(t *testing.T) {
	for _, in := range []string{"null\n", "[]\n", "42\n", `{"id":1}` + "\n", "{\n", `{"method":7}` + "\n"} {
		_, err := newFrameReader(strings.NewReader(in), 0).next()
		if err == nil || err == io.EOF || errors.Is(err, errFrameTooLarge) {
			t.Errorf("%q: err = %v, want a malformed-frame error", in, err)
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"session.event","params":{"id":"evt_1","session_id":"ses_1","client_key_id":null,"event_type":"x","payload":{},"created_at":"2026-07-06T18:26:10.000Z"}}` + "\n",
		`{"jsonrpc":"2.0","method":"session.event_delta","params":{"session_id":"s","client_key_id":"k","text":"hi"}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"result":{"message":{"role":"assistant","content":"x"},"events":[]}}` + "\n",
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` + "\n",
		`{"jsonrpc":"2.0","error":{"code":-32000,"message":"lagged; reconnect with since_event_id"}}`,
		"\n\n{}\n",
		"{\"method\":\"m\"}\r\n{\"result\":1}",
		strings.Repeat("a", 300) + "\n",
		"[1]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 256
		fr := newFrameReader(bytes.NewReader(data), max)
		for n := 0; ; n++ {
			if n > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("more frames than lines")
			}
			fr1, err := fr.next()
			if err != nil {
				return // io.EOF, too large or malformed all end the stream
			}
			k, ok := fr1.kind()
			if !ok {
				t.Fatalf("frame without a kind returned")
			}
			if k == kindNote && fr1.Method == "" {
				t.Fatalf("notification without a method")
			}
			if len(fr1.Params) > max || len(fr1.Result) > max {
				t.Fatalf("member larger than the frame limit")
			}
			if fr1.Method == "session.event" {
				var ev Event
				_ = json.Unmarshal(fr1.Params, &ev) // must not panic
			}
		}
	})
}

func BenchmarkReadFrame(b *testing.B) {
	line := `{"jsonrpc":"2.0","method":"session.event","params":{"id":"evt_0123456789abcdef0123456789abcdef","session_id":"ses_0123456789abcdef0123456789abcdef","client_key_id":"key_0123","event_type":"provider.response","payload":{"attempt":0,"ok":true,"status":200,"body":{"content":[{"type":"text","text":"hello there"}]}},"created_at":"2026-07-06T18:26:10.000Z"}}` + "\n"
	data := []byte(strings.Repeat(line, 100))
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		fr := newFrameReader(bytes.NewReader(data), 0)
		st := &stream{fr: fr}
		for {
			if _, _, err := st.next(); err != nil {
				break
			}
		}
	}
}
