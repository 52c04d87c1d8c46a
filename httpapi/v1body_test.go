package httpapi

import (
	"github.com/baton-engine/baton/internal/httpx"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
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
