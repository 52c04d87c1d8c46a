package baton

import (
	"strconv"
	"strings"
	"testing"
)

func TestExpandVars(t *testing.T) {
	env := map[string]string{
		"TOKEN": "s3cret",
		"EMPTY": "",
		"A":     "x",
		"B":     "y",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string // substring; "" means success
	}{
		{name: "no tokens", in: "plain text", want: "plain text"},
		{name: "empty", in: "", want: ""},
		{name: "whole value", in: "${TOKEN}", want: "s3cret"},
		{name: "embedded", in: "Bearer ${TOKEN}", want: "Bearer s3cret"},
		{name: "several", in: "${A}-${B}/${A}", want: "x-y/x"},
		{name: "adjacent", in: "${A}${B}", want: "xy"},
		{name: "set but empty", in: "<${EMPTY}>", want: "<>"},
		{name: "lone dollar", in: "cost $5", want: "cost $5"},
		{name: "dollar at end", in: "abc$", want: "abc$"},
		{name: "dollar dollar", in: "$${A}", want: "$x"},
		{name: "dollar paren", in: "$(A) $A", want: "$(A) $A"},
		{name: "value not re-expanded", in: "${A}", want: "x"},
		{name: "unterminated", in: "Bearer ${TOKEN", wantErr: "unterminated"},
		{name: "unterminated after token", in: "${A} ${", wantErr: "unterminated"},
		{name: "unset", in: "Bearer ${MISSING}", wantErr: `"MISSING"`},
		{name: "empty name", in: "${}", wantErr: "empty variable name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandVars(tt.in, lookup)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ExpandVars(%q) = %q, want error containing %q", tt.in, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ExpandVars(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error %q leaks a resolved value", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ExpandVars(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ExpandVars(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExpandVarsErrorHidesResolvedValues(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "TOKEN" {
			return "s3cret", true
		}
		return "", false
	}
	for _, in := range []string{"${TOKEN} ${NOPE}", "${TOKEN} ${"} {
		_, err := ExpandVars(in, lookup)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("ExpandVars(%q) error = %v; want an error without the resolved value", in, err)
		}
	}
}

func TestExpandVarsNilLookup(t *testing.T) {
	if got, err := ExpandVars("no vars", nil); err != nil || got != "no vars" {
		t.Fatalf("ExpandVars without tokens = %q, %v", got, err)
	}
	if _, err := ExpandVars("${HOME}", nil); err == nil || !strings.Contains(err.Error(), `"HOME"`) {
		t.Fatalf("ExpandVars with nil lookup = %v, want unset-variable error naming HOME", err)
	}
}

func FuzzExpandVars(f *testing.F) {
	for _, s := range []string{"", "plain", "${A}", "a${A}b${B}c", "$", "${", "${}", "$${A}", "${A", "}${A}{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Every variable resolves to a marker that cannot appear in
		// templates built from the alphabet below, so the output can be
		// checked against a straightforward reference expansion.
		lookup := func(k string) (string, bool) {
			if strings.HasPrefix(k, "U") {
				return "", false
			}
			return "<" + k + ">", true
		}
		got, err := ExpandVars(s, lookup)
		want, wantErr := refExpand(s, lookup)
		if (err != nil) != (wantErr != "") {
			t.Fatalf("ExpandVars(%q) = %q, %v; reference error %q", s, got, err, wantErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("ExpandVars(%q) error %q, want it to contain %q", s, err, wantErr)
			}
			return
		}
		if got != want {
			t.Fatalf("ExpandVars(%q) = %q, want %q", s, got, want)
		}
		if !strings.Contains(s, "${") && got != s {
			t.Fatalf("ExpandVars(%q) changed a template without tokens: %q", s, got)
		}
	})
}

// refExpand is a byte-at-a-time reference implementation of ExpandVars.
func refExpand(s string, lookup func(string) (string, bool)) (string, string) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) || s[i+1] != '{' {
			out = append(out, s[i])
			continue
		}
		j := i + 2
		for j < len(s) && s[j] != '}' {
			j++
		}
		if j == len(s) {
			return "", "unterminated"
		}
		name := s[i+2 : j]
		if name == "" {
			return "", "empty variable name"
		}
		v, ok := lookup(name)
		if !ok {
			return "", strconv.Quote(name)
		}
		out = append(out, v...)
		i = j
	}
	return string(out), ""
}
