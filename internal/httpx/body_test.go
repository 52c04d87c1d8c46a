package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

func TestReadJSON(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		chunked     bool // hide the length, so the limit is found while reading
		max         int64
		status      int // 0: success
		code        string
		text        string // after the malformed-JSON prefix, for a 400
	}{
		{name: "json", contentType: "application/json", body: `{"a":1}`},
		{name: "charset", contentType: "application/json; charset=utf-8", body: `{}`},
		{name: "upper case", contentType: "Application/JSON", body: `{}`},
		{name: "suffix", contentType: "application/problem+json", body: `{}`},
		{name: "missing", contentType: "", body: `{}`, status: 415},
		{name: "text", contentType: "text/plain", body: `{}`, status: 415},
		{name: "json-seq", contentType: "application/json-seq", body: `{}`, status: 415},
		{name: "garbage", contentType: ";;;", body: `{}`, status: 415},
		{name: "at limit", contentType: "application/json", body: `{"a":"xx"}`, max: 10},
		{name: "over limit", contentType: "application/json", body: `{"a":"xxx"}`, max: 10, status: 413, code: baton.ECodePayloadTooLarge},
		{name: "over limit chunked", contentType: "application/json", body: `{"a":"xxx"}`, max: 10, chunked: true, status: 413, code: baton.ECodePayloadTooLarge},
		{name: "default limit", contentType: "application/json", body: `"` + strings.Repeat("x", DefaultMaxBody) + `"`, status: 413, code: baton.ECodePayloadTooLarge},
		{name: "utf-8", contentType: "application/json", body: `{"metadata":{"note":"héllo 日本 🙂","esc":"\ud800"}}`},
		{name: "invalid utf-8 in a string", contentType: "application/json", body: "{\"metadata\":{\"note\":\"hi \xff\xfe\"}}", status: 400, text: "invalid UTF-8 at offset 24"},
		{name: "truncated sequence", contentType: "application/json", body: "[\"\xe6\x97\"]", status: 400, text: "invalid UTF-8 at offset 2"},
		{name: "encoded surrogate", contentType: "application/json", body: "\"\xed\xa0\x80\"", status: 400, text: "invalid UTF-8 at offset 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // no Len method: ContentLength stays unknown
			}
			r := httptest.NewRequest("POST", "/", body)
			if tt.chunked {
				r.ContentLength = -1
			}
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			got, err := ReadJSON(httptest.NewRecorder(), r, tt.max)
			if tt.status == 0 {
				if err != nil || string(got) != tt.body {
					t.Fatalf("ReadJSON = %q, %v", got, err)
				}
				return
			}
			if tt.status == 415 {
				var rej *Rejection
				if !errors.As(err, &rej) || rej.Status != 415 || rej.Text != "Expected request with `Content-Type: application/json`" {
					t.Fatalf("err = %v, want a 415 rejection", err)
				}
				return
			}
			if tt.status == 400 {
				var rej *Rejection
				if !errors.As(err, &rej) || rej.Status != 400 || rej.Text != "Failed to parse the request body as JSON: "+tt.text {
					t.Fatalf("err = %v, want the 400 rejection %q", err, tt.text)
				}
				return
			}
			if baton.ErrorCode(err) != tt.code {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
		})
	}
}

func TestDecodeObject(t *testing.T) {
	tests := []struct {
		body   string
		status int
		text   string // rejection text prefix
	}{
		{`{"a":1}`, 0, ""},
		{` {"a":1} `, 0, ""},
		{``, 400, "Failed to parse the request body as JSON: "},
		{`{`, 400, "Failed to parse the request body as JSON: "},
		{`{"a":1}x`, 400, "Failed to parse the request body as JSON: "},
		{`{"a":1}{}`, 400, "Failed to parse the request body as JSON: "},
		{`[]`, 422, "Failed to deserialize the JSON body into the target type: invalid type: sequence, expected a map"},
		{`null`, 422, "Failed to deserialize the JSON body into the target type: invalid type: null"},
		{`"s"`, 422, `Failed to deserialize the JSON body into the target type: invalid type: string "s"`},
		{`12`, 422, "Failed to deserialize the JSON body into the target type: invalid type: integer `12`"},
	}
	for _, tt := range tests {
		_, err := DecodeObject([]byte(tt.body))
		if tt.status == 0 {
			if err != nil {
				t.Errorf("DecodeObject(%q) = %v", tt.body, err)
			}
			continue
		}
		var rej *Rejection
		if !errors.As(err, &rej) || rej.Status != tt.status || !strings.HasPrefix(rej.Text, tt.text) {
			t.Errorf("DecodeObject(%q) = %v, want %d %q…", tt.body, err, tt.status, tt.text)
		}
	}
}

func TestObjectMembers(t *testing.T) {
	obj, err := DecodeObject([]byte(`{"s":"x","n":null,"i":5,"f":1.5,"a":[1,"b"],"o":{"k":"v"},"S":"case","u":7,"neg":-1}`))
	if err != nil {
		t.Fatal(err)
	}
	shape := func(err error, text string) {
		t.Helper()
		var rej *Rejection
		if !errors.As(err, &rej) || rej.Status != 422 || rej.Text != "Failed to deserialize the JSON body into the target type: "+text {
			t.Errorf("err = %v, want 422 %q", err, text)
		}
	}
	if s, err := obj.String("s"); err != nil || s != "x" {
		t.Errorf("String(s) = %q, %v", s, err)
	}
	_, err = obj.String("missing")
	shape(err, "missing field `missing`")
	_, err = obj.String("n")
	shape(err, "n: invalid type: null, expected a string")
	_, err = obj.String("i")
	shape(err, "i: invalid type: integer `5`, expected a string")
	if p, err := obj.OptString("n"); err != nil || p != nil {
		t.Errorf("OptString(null) = %v, %v", p, err)
	}
	if p, err := obj.OptString("absent"); err != nil || p != nil {
		t.Errorf("OptString(absent) = %v, %v", p, err)
	}
	_, err = obj.OptString("f")
	shape(err, "f: invalid type: floating point `1.5`, expected a string")
	if _, err := obj.String("S"); err != nil {
		t.Errorf("String(S) = %v", err)
	}
	if _, ok := obj.Raw("n"); ok {
		t.Error("Raw(null) reported present")
	}
	if a, err := obj.Array("a"); err != nil || len(a) != 2 {
		t.Errorf("Array(a) = %s, %v", a, err)
	}
	if a, err := obj.Array("absent"); err != nil || a != nil {
		t.Errorf("Array(absent) = %s, %v", a, err)
	}
	_, err = obj.Array("n")
	shape(err, "n: invalid type: null, expected a sequence")
	_, err = obj.Array("o")
	shape(err, "o: invalid type: map, expected a sequence")
	_, err = obj.RequiredArray("absent")
	shape(err, "missing field `absent`")
	if u, err := obj.OptUint("u"); err != nil || *u != 7 {
		t.Errorf("OptUint(u) = %v, %v", u, err)
	}
	_, err = obj.OptUint("neg")
	shape(err, "neg: invalid value: integer `-1`, expected u64")
	_, err = obj.OptUint("f")
	shape(err, "f: invalid value: floating point `1.5`, expected u64")

	raw, _ := obj.Raw("o")
	inner, err := ObjectAt("tools[3]", raw)
	if err != nil {
		t.Fatal(err)
	}
	_, err = inner.String("name")
	shape(err, "tools[3]: missing field `name`")
	_, err = inner.OptUint("k")
	shape(err, `tools[3].k: invalid value: string "v", expected u64`)
	if inner.Path("k") != "tools[3].k" || obj.Path("k") != "k" {
		t.Errorf("paths %q %q", inner.Path("k"), obj.Path("k"))
	}
	_, err = ObjectAt("x", json.RawMessage(`[1]`))
	shape(err, "x: invalid type: sequence, expected a map")
}
