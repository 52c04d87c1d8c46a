package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

func TestDecodeRegistration(t *testing.T) {
	ok := `{"name":"laptop","lifetime":{"type":"ttl","data":{"seconds":5}},"tools":[{"name":"read_file","description":"r","parameters":{"type":"object","properties":{"p":{"type":["string","null"]}},"required":["p"]}}]}`
	reg, err := DecodeRegistration([]byte(ok))
	if err != nil || reg.Name != "laptop" || reg.TTLSeconds != 5 || len(reg.Tools) != 1 || reg.Tools[0].Name != "read_file" {
		t.Fatalf("%+v %v", reg, err)
	}
	if reg, err := DecodeRegistration([]byte(`{"name":"a","lifetime":{"type":"never"}}`)); err != nil || reg.TTLSeconds != 0 || reg.Tools == nil {
		t.Fatalf("never, no tools: %+v %v", reg, err)
	}
	tool := func(name, desc, params string) string {
		return `{"name":"a","lifetime":{"type":"never"},"tools":[{"name":` + name + `,"description":` + desc + `,"parameters":` + params + `}]}`
	}
	bad := map[string]string{
		"not json":          `{`,
		"array":             `[]`,
		"null":              `null`,
		"lifetime string":   `{"name":"a","lifetime":"never"}`,
		"ttl 3601":          `{"name":"a","lifetime":{"type":"ttl","data":{"seconds":3601}}}`,
		"ttl string":        `{"name":"a","lifetime":{"type":"ttl","data":{"seconds":"5"}}}`,
		"name number":       `{"name":1,"lifetime":{"type":"never"}}`,
		"name space":        `{"name":"a b","lifetime":{"type":"never"}}`,
		"tools object":      `{"name":"a","lifetime":{"type":"never"},"tools":{}}`,
		"tool not object":   `{"name":"a","lifetime":{"type":"never"},"tools":[1]}`,
		"desc number":       tool(`"x"`, `1`, `{}`),
		"params array":      tool(`"x"`, `"d"`, `[]`),
		"type array empty":  tool(`"x"`, `"d"`, `{"type":[]}`),
		"type array dup":    tool(`"x"`, `"d"`, `{"type":["string","string"]}`),
		"type number":       tool(`"x"`, `"d"`, `{"type":3}`),
		"properties array":  tool(`"x"`, `"d"`, `{"properties":[]}`),
		"nested bad type":   tool(`"x"`, `"d"`, `{"properties":{"a":{"type":"nope"}}}`),
		"required string":   tool(`"x"`, `"d"`, `{"required":"a"}`),
		"items number":      tool(`"x"`, `"d"`, `{"items":1}`),
		"enum object":       tool(`"x"`, `"d"`, `{"enum":{}}`),
		"description array": tool(`"x"`, `"d"`, `{"description":[]}`),
		"too deep":          tool(`"x"`, `"d"`, strings.Repeat(`{"items":`, 40)+`{}`+strings.Repeat(`}`, 40)),
	}
	for name, body := range bad {
		if _, err := DecodeRegistration([]byte(body)); baton.ErrorCode(err) != baton.ECodeBadRequest {
			t.Errorf("%s: err = %v, want bad_request", name, err)
		}
	}
}

func TestParseSessionID(t *testing.T) {
	hex := "0123456789abcdef0123456789abcdef"
	for in, want := range map[string]string{
		"ses_" + hex:                           "ses_" + hex,
		"01234567-89ab-cdef-0123-456789abcdef": "ses_" + hex,
		"01234567-89AB-CDEF-0123-456789ABCDEF": "ses_" + hex,
		"0123456789abcdef0123456789abcdef":     "",
		"01234567-89ab-cdef-0123-456789abcdeg": "",
		"ses_0123":                             "",
		"01234567+89ab-cdef-0123-456789abcdef": "",
		"":                                     "",
	} {
		got, err := ParseSessionID(in)
		if want == "" {
			if baton.ErrorCode(err) != baton.ECodeBadRequest {
				t.Errorf("%q: %q %v, want bad_request", in, got, err)
			}
		} else if got != want || err != nil {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	if u := SessionUUID("ses_" + hex); u != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Errorf("SessionUUID %q", u)
	}
}

func TestV1Status(t *testing.T) {
	for code, want := range map[string]string{
		baton.ECodeUnauthorized: "unauthorized 401", baton.ECodeForbidden: "forbidden 403",
		baton.ECodeNotFound: "not_found 404", baton.ECodeBadRequest: "invalid_request 400",
		baton.ECodeConflict: "conflict 409", baton.ECodeSessionClosed: "conflict 409",
		"client_outdated": "client_outdated 426", "precondition_failed": "precondition_failed 412",
		baton.ECodeTooManyRequests: "too_many_requests 429", baton.ECodeInternal: "internal 500",
		baton.ECodePayloadTooLarge: "invalid_request 413",
		"something_else":           "internal 500",
	} {
		c, st := httpx.V1Status(code)
		if got := c + " " + itoa(st); got != want {
			t.Errorf("%s → %s, want %s", code, got, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func FuzzDecodeRegistration(f *testing.F) {
	f.Add([]byte(`{"name":"laptop","lifetime":{"type":"never"},"tools":[{"name":"t","description":"d","parameters":{"type":"object"}}]}`))
	f.Add([]byte(`{"name":"a","lifetime":{"type":"ttl","data":{"seconds":5}}}`))
	f.Add([]byte(`{"name":"a","lifetime":{"type":"ttl","data":{"seconds":1e9}},"tools":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"tools":[{"parameters":{"items":[{"type":["a"]}]}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		reg, err := DecodeRegistration(body)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeBadRequest {
				t.Fatalf("error code %q", baton.ErrorCode(err))
			}
			return
		}
		if len(reg.Name) < 1 || len(reg.Name) > 32 || !clientName(reg.Name) {
			t.Fatalf("accepted name %q", reg.Name)
		}
		if reg.TTLSeconds != 0 && (reg.TTLSeconds < 5 || reg.TTLSeconds > 3600) {
			t.Fatalf("accepted ttl %d", reg.TTLSeconds)
		}
		if len(reg.Tools) > 64 {
			t.Fatalf("accepted %d tools", len(reg.Tools))
		}
		for _, tl := range reg.Tools {
			if !toolName(tl.Name) || len(tl.Name) > 64 || len(tl.Description) > 4096 || !isObject(tl.Parameters) {
				t.Fatalf("accepted tool %+v", tl)
			}
		}
	})
}

// FuzzDecodeToolsBody: a replaced tool list passes the same checks as a
// registration's, and every refusal is a bad_request.
func FuzzDecodeToolsBody(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"t","description":"d","parameters":{"type":"object"}}]}`))
	f.Add([]byte(`{"tools":[]}`))
	f.Add([]byte(`{"tools":null}`))
	f.Add([]byte(`{"tools":[{"name":"t"},{"name":"t"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tools, err := DecodeToolsBody(body)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeBadRequest {
				t.Fatalf("error code %q", baton.ErrorCode(err))
			}
			return
		}
		if len(tools) > 64 {
			t.Fatalf("accepted %d tools", len(tools))
		}
		for _, tl := range tools {
			if !toolName(tl.Name) || len(tl.Name) > 64 || len(tl.Description) > 4096 || !isObject(tl.Parameters) {
				t.Fatalf("accepted tool %+v", tl)
			}
		}
	})
}

// FuzzDecodeResult: an accepted call result has content that is a JSON
// string or an array of objects, exactly as sent; every refusal is a
// bad_request.
func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"content":"done"}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"x"}],"is_error":true}`))
	f.Add([]byte(`{"content":[]}`))
	f.Add([]byte(`{"content":null}`))
	f.Add([]byte(`{"content":"x","is_error":"yes"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := DecodeResult(body)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeBadRequest {
				t.Fatalf("error code %q", baton.ErrorCode(err))
			}
			return
		}
		var s string
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(res.Content, &s) != nil && (json.Unmarshal(res.Content, &blocks) != nil || blocks == nil) {
			t.Fatalf("accepted content %s", res.Content)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil || string(m["content"]) != string(res.Content) {
			t.Fatalf("content %s is not the body's (%s)", res.Content, body)
		}
	})
}

// FuzzParseSessionID: an accepted id is a ses_ id of 32 lower-case hex
// digits, its UUID form parses back to it, and that form is canonical.
func FuzzParseSessionID(f *testing.F) {
	f.Add("ses_0123456789abcdef0123456789abcdef")
	f.Add("01234567-89AB-cdef-0123-456789abcdef")
	f.Add("ses_0123")
	f.Add("0123456789abcdef0123456789abcdef0123")
	f.Add("0123456-789ab-cdef-0123-456789abcdef")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseSessionID(s)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeBadRequest {
				t.Fatalf("error code %q", baton.ErrorCode(err))
			}
			return
		}
		digits, ok := strings.CutPrefix(id, baton.PrefixSession)
		if !ok || len(digits) != 32 || strings.ToLower(digits) != digits {
			t.Fatalf("ParseSessionID(%q) = %q", s, id)
		}
		u := SessionUUID(id)
		if back, err := ParseSessionID(u); err != nil || back != id || len(u) != 36 {
			t.Fatalf("UUID form %q of %q parses as %q, %v", u, id, back, err)
		}
	})
}
