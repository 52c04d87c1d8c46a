// Package serde words JSON shape errors as BAE's deserializer (Rust's
// serde and serde_json) does, so that a request Baton refuses gets the
// message BAE would give: "invalid type: string \"hi\", expected a
// sequence". Values are named by their JSON type and printed as Rust
// prints them: strings quoted as {:?} does, floats in serde_json's form.
package serde

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/baton-engine/baton/internal/rawjson"
)

// InvalidType is serde's message for a value of the wrong JSON type, e.g.
// InvalidType(`"hi"`, "a sequence").
func InvalidType(raw []byte, expected string) string {
	return "invalid type: " + Unexpected(raw) + ", expected " + expected
}

// Unexpected names a JSON value as serde_json does in its messages.
func Unexpected(raw []byte) string {
	switch rawjson.Kind(raw) {
	case '{':
		return "map"
	case '[':
		return "sequence"
	case 'n':
		return "null"
	case 't':
		return "boolean `true`"
	case 'f':
		return "boolean `false`"
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return "string " + Quote(s)
	}
	// A number: an integer that fits u64 (i64 when negative) stays one;
	// anything else, -0 included, is read as a float.
	s := strings.TrimSpace(string(raw))
	if !strings.ContainsAny(s, ".eE") && s != "-0" {
		if _, err := strconv.ParseUint(s, 10, 64); err == nil {
			return "integer `" + s + "`"
		}
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return "integer `" + s + "`"
		}
	}
	f, _ := strconv.ParseFloat(s, 64)
	return "floating point `" + Float(f) + "`"
}

// Float formats a float as serde_json prints one: the shortest digits
// that read back as f, in plain notation (always with a fraction) for
// decimal exponents from -5 to 16, else as d.ddde±n.
func Float(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64) // not reachable from JSON
	}
	sign := ""
	if math.Signbit(f) {
		sign, f = "-", -f
	}
	if f == 0 {
		return sign + "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	point := x + 1 // digits before the decimal point
	switch {
	case point > 0 && point <= 16:
		if len(digits) <= point {
			return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
		}
		return sign + digits[:point] + "." + digits[point:]
	case point <= 0 && point > -5:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case len(digits) == 1:
		return sign + digits + "e" + strconv.Itoa(x)
	}
	return sign + digits[:1] + "." + digits[1:] + "e" + strconv.Itoa(x)
}

// Quote quotes s as Rust's {:?} formats a string: \t \r \n \\ \" \0
// escaped, other characters that do not print as \u{hex}.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case 0:
			b.WriteString(`\0`)
		default:
			if unicode.IsGraphic(r) {
				b.WriteRune(r)
			} else {
				fmt.Fprintf(&b, `\u{%x}`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
