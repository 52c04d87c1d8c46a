package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
)

// This file decodes the JSON-RPC params BAE reads with serde, so that a
// wrong shape is answered with serde's own words ("invalid type: string
// \"hi\", expected struct MessageBody"): what a Go decoder would say names
// Go types. Objects are read as serde_json reads a map (exact keys, the
// last of repeated keys winning, members in sorted key order), which fixes
// which of several bad members is reported.

// kind returns the first byte of a valid JSON value, which names its type.
func kind(raw []byte) byte {
	if i := rawjson.SkipSpace(raw, 0); i < len(raw) {
		return raw[i]
	}
	return 0
}

// invalidType is serde's message for a value of the wrong JSON type.
func invalidType(raw []byte, expected string) string {
	return "invalid type: " + unexpected(raw) + ", expected " + expected
}

// unexpected names a JSON value as serde_json does in its messages.
func unexpected(raw []byte) string {
	switch kind(raw) {
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
		return "string " + rustQuote(s)
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
	return "floating point `" + rustFloat(f) + "`"
}

// rustFloat formats a float as serde_json prints one: the shortest digits
// that read back as f, in plain notation (always with a fraction) for
// decimal exponents from -5 to 16, else as d.ddde±n.
func rustFloat(f float64) string {
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

// rustQuote quotes s as Rust's {:?} formats a string: \t \r \n \\ \" \0
// escaped, other characters that do not print as \u{hex}.
func rustQuote(s string) string {
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

// object reads a JSON object's members as serde_json's map holds them,
// with their keys in sorted order.
func object(raw []byte) (map[string]json.RawMessage, []string) {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return m, keys
}

// elements returns the elements of a JSON array.
func elements(raw []byte) []json.RawMessage {
	var out []json.RawMessage
	_ = rawjson.EachElement(raw, func(e []byte) { out = append(out, e) })
	return out
}

// stringValue decodes a JSON string; ok is false for any other value.
func stringValue(raw []byte) (string, bool) {
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// parseMessage validates sendMessage's message param as BAE reads it,
// {role?: string, content: any JSON} with role defaulting to "user"
// (spec-client §5.2 step 3). Like serde, it also takes the array form
// [role, content].
func parseMessage(raw json.RawMessage) (baton.Message, error) {
	if raw == nil {
		return baton.Message{}, invalid(`missing "message"`)
	}
	const name = "struct MessageBody"
	msg := baton.Message{Role: "user"}
	switch kind(raw) {
	case '{':
		m, keys := object(raw)
		for _, k := range keys {
			if k == "role" {
				s, ok := stringValue(m[k])
				if !ok {
					return baton.Message{}, invalid("%s", invalidType(m[k], "a string"))
				}
				msg.Role = s
			}
		}
		content, ok := m["content"]
		if !ok {
			return baton.Message{}, invalid("missing field `content`")
		}
		msg.Content = content
	case '[':
		elems := elements(raw)
		if len(elems) == 0 {
			return baton.Message{}, invalid("invalid length 0, expected %s with 2 elements", name)
		}
		s, ok := stringValue(elems[0])
		if !ok {
			return baton.Message{}, invalid("%s", invalidType(elems[0], "a string"))
		}
		msg.Role = s
		switch len(elems) {
		case 1:
			return baton.Message{}, invalid("invalid length 1, expected %s with 2 elements", name)
		case 2:
			msg.Content = elems[1]
		default:
			return baton.Message{}, invalid("invalid length %d, expected fewer elements in array", len(elems))
		}
	default:
		return baton.Message{}, invalid("%s", invalidType(raw, name))
	}
	return msg, nil
}

// parseClientTools validates updateClientTools' tools param as BAE reads
// it, an array of {name: string, description?: string|null,
// input_schema?: any} with non-blank names (spec-client §5.5). serde would
// also take a tool as the array [name, description, input_schema], which
// BAE then stores and advertises as that array; Baton refuses it.
func parseClientTools(raw json.RawMessage) ([]baton.ToolDef, error) {
	if raw == nil {
		return nil, invalid(`missing "tools"`)
	}
	if kind(raw) != '[' {
		return nil, invalid("%s", invalidType(raw, "a sequence"))
	}
	elems := elements(raw)
	tools := make([]baton.ToolDef, len(elems))
	for i, el := range elems {
		if kind(el) != '{' {
			return nil, invalid("%s", invalidType(el, "struct ClientToolDef"))
		}
		m, keys := object(el)
		t := &tools[i]
		t.InputSchema = json.RawMessage(`{}`)
		for _, k := range keys {
			v := m[k]
			switch k {
			case "description":
				if kind(v) == 'n' {
					continue
				}
				s, ok := stringValue(v)
				if !ok {
					return nil, invalid("%s", invalidType(v, "a string"))
				}
				t.Description = &s
			case "input_schema":
				if kind(v) != 'n' {
					t.InputSchema = v
				}
			case "name":
				s, ok := stringValue(v)
				if !ok {
					return nil, invalid("%s", invalidType(v, "a string"))
				}
				t.Name = s
			}
		}
		if _, ok := m["name"]; !ok {
			return nil, invalid("missing field `name`")
		}
	}
	for _, t := range tools {
		if strings.TrimSpace(t.Name) == "" {
			return nil, invalid(`every tool requires a non-empty "name"`)
		}
	}
	return tools, nil
}
