package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/baton-engine/baton"
)

// Decoding of /v1 client bodies. Every failure is ECodeBadRequest, which
// /v1 renders as 400 invalid_request.

func badRequest(format string, args ...any) error {
	return baton.Errorf(baton.ECodeBadRequest, format, args...)
}

// object decodes raw as a JSON object (duplicate keys: the last wins, as
// encoding/json does).
func object(raw []byte, what string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil || !isObject(raw) {
		return nil, badRequest("%s must be a JSON object", what)
	}
	return m, nil
}

func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

func present(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := m[key]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil, false
	}
	return v, true
}

func str(m map[string]json.RawMessage, key, what string) (string, bool, error) {
	v, ok := present(m, key)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", true, badRequest("%s must be a string", what)
	}
	return s, true, nil
}

// clientName reports whether s matches ^[a-z0-9-]+$.
func clientName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return s != ""
}

// toolName reports whether s matches ^[A-Za-z0-9_-]+$.
func toolName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return s != ""
}

// DecodeRegistration decodes and validates a registration body (the registered-clients contract, docs/api.md).
func DecodeRegistration(body []byte) (*baton.ClientRegistration, error) {
	m, err := object(body, "the request body")
	if err != nil {
		return nil, err
	}
	reg := &baton.ClientRegistration{}
	lt, ok := present(m, "lifetime")
	if !ok {
		return nil, badRequest(`missing field "lifetime"`)
	}
	if reg.TTLSeconds, err = lifetime(lt); err != nil {
		return nil, err
	}
	name, ok, err := str(m, "name", `"name"`)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, badRequest(`missing field "name"`)
	}
	if len(name) < 1 || len(name) > baton.MaxClientNameLen || !clientName(name) {
		return nil, badRequest(`"name" must be 1 to %d characters of a-z, 0-9 and -`, baton.MaxClientNameLen)
	}
	reg.Name = name
	if reg.Tools, err = decodeClientTools(m); err != nil {
		return nil, err
	}
	return reg, nil
}

// DecodeToolsBody decodes the body of PUT …/tools: {"tools":[…]}.
func DecodeToolsBody(body []byte) ([]baton.ClientTool, error) {
	m, err := object(body, "the request body")
	if err != nil {
		return nil, err
	}
	if _, ok := present(m, "tools"); !ok {
		return nil, badRequest(`missing field "tools"`)
	}
	return decodeClientTools(m)
}

// lifetime returns the ttl in seconds, 0 for never.
func lifetime(raw json.RawMessage) (int, error) {
	m, err := object(raw, `"lifetime"`)
	if err != nil {
		return 0, err
	}
	typ, ok, err := str(m, "type", `"lifetime.type"`)
	if err != nil {
		return 0, err
	}
	switch {
	case !ok:
		return 0, badRequest(`missing field "lifetime.type"`)
	case typ == "never":
		return 0, nil
	case typ != "ttl":
		return 0, badRequest(`"lifetime.type" must be "never" or "ttl"`)
	}
	dr, ok := present(m, "data")
	if !ok {
		return 0, badRequest(`missing field "lifetime.data"`)
	}
	data, err := object(dr, `"lifetime.data"`)
	if err != nil {
		return 0, err
	}
	sr, ok := present(data, "seconds")
	if !ok {
		return 0, badRequest(`missing field "lifetime.data.seconds"`)
	}
	var secs int64
	if err := json.Unmarshal(sr, &secs); err != nil || secs < baton.MinClientTTLSeconds || secs > baton.MaxClientTTLSeconds {
		return 0, badRequest(`"lifetime.data.seconds" must be an integer from %d to %d`, baton.MinClientTTLSeconds, baton.MaxClientTTLSeconds)
	}
	return int(secs), nil
}

// decodeClientTools validates m["tools"]; absent or null is no tools.
func decodeClientTools(m map[string]json.RawMessage) ([]baton.ClientTool, error) {
	out := []baton.ClientTool{}
	raw, ok := present(m, "tools")
	if !ok {
		return out, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest(`"tools" must be an array`)
	}
	if len(items) > baton.MaxClientTools {
		return nil, badRequest(`"tools" holds %d items, more than %d`, len(items), baton.MaxClientTools)
	}
	seen := map[string]bool{}
	for i, it := range items {
		what := fmt.Sprintf(`"tools[%d]"`, i)
		t, err := object(it, what)
		if err != nil {
			return nil, err
		}
		name, ok, err := str(t, "name", what+".name")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, badRequest("missing field %s.name", what)
		}
		if len(name) > baton.MaxClientToolNameLen || !toolName(name) {
			return nil, badRequest(`%s.name must be 1 to %d characters of A-Z, a-z, 0-9, _ and -`, what, baton.MaxClientToolNameLen)
		}
		if seen[name] {
			return nil, badRequest("%s.name %q is declared twice", what, name)
		}
		seen[name] = true
		desc, ok, err := str(t, "description", what+".description")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, badRequest("missing field %s.description", what)
		}
		if len(desc) > baton.MaxClientToolDescLen {
			return nil, badRequest("%s.description is longer than %d characters", what, baton.MaxClientToolDescLen)
		}
		params, ok := present(t, "parameters")
		if !ok {
			return nil, badRequest("missing field %s.parameters", what)
		}
		if err := checkSchema(params, what+".parameters", 0); err != nil {
			return nil, err
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, params); err != nil {
			return nil, badRequest("%s.parameters is not valid JSON", what)
		}
		out = append(out, baton.ClientTool{Name: name, Description: desc, Parameters: compact.Bytes()})
	}
	return out, nil
}

// schemaTypes are the JSON Schema type names.
var schemaTypes = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

// maxSchemaDepth bounds schema nesting.
const maxSchemaDepth = 32

// checkSchema is a structural check of a JSON Schema object: it must be an
// object; "type", when present, a type name or a non-empty array of
// distinct ones; "properties" an object of schemas; "required" an array of
// strings; "items" a schema or an array of schemas; "enum" an array;
// "description" and "title" strings. Other keywords pass unchecked.
func checkSchema(raw json.RawMessage, what string, depth int) error {
	if depth > maxSchemaDepth {
		return badRequest("%s nests deeper than %d levels", what, maxSchemaDepth)
	}
	m, err := object(raw, what)
	if err != nil {
		return badRequest("%s must be a JSON Schema object", what)
	}
	if v, ok := m["type"]; ok {
		var one string
		var many []string
		switch {
		case json.Unmarshal(v, &one) == nil:
			if !schemaTypes[one] {
				return badRequest("%s.type %q is not a JSON Schema type", what, one)
			}
		case json.Unmarshal(v, &many) == nil && len(many) > 0:
			dup := map[string]bool{}
			for _, t := range many {
				if !schemaTypes[t] || dup[t] {
					return badRequest("%s.type must list distinct JSON Schema types", what)
				}
				dup[t] = true
			}
		default:
			return badRequest("%s.type must be a type name or an array of them", what)
		}
	}
	if v, ok := m["properties"]; ok {
		props, err := object(v, what+".properties")
		if err != nil {
			return err
		}
		for k, p := range props {
			if err := checkSchema(p, fmt.Sprintf("%s.properties[%q]", what, k), depth+1); err != nil {
				return err
			}
		}
	}
	if v, ok := m["required"]; ok {
		var req []string
		if err := json.Unmarshal(v, &req); err != nil || req == nil {
			return badRequest("%s.required must be an array of strings", what)
		}
	}
	if v, ok := m["items"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) == nil && list != nil {
			for i, s := range list {
				if err := checkSchema(s, fmt.Sprintf("%s.items[%d]", what, i), depth+1); err != nil {
					return err
				}
			}
		} else if err := checkSchema(v, what+".items", depth+1); err != nil {
			return err
		}
	}
	if v, ok := m["enum"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil || list == nil {
			return badRequest("%s.enum must be an array", what)
		}
	}
	for _, k := range []string{"description", "title"} {
		if v, ok := m[k]; ok {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return badRequest("%s.%s must be a string", what, k)
			}
		}
	}
	return nil
}
