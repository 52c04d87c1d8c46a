package engine

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/internal/serde"
)

// This file decodes the JSON-RPC params BAE reads with serde, so that a
// wrong shape is answered with serde's own words ("invalid type: string
// \"hi\", expected struct MessageBody"): what a Go decoder would say names
// Go types. Objects are read as serde_json reads a map (exact keys, the
// last of repeated keys winning, members in sorted key order), which fixes
// which of several bad members is reported.

// object reads a JSON object's members as serde_json's map holds them,
// with their keys in sorted order.
// Params come from wire.Parse, so raw is valid JSON; the values are
// slices of it.
func object(raw []byte) (map[string]json.RawMessage, []string) {
	m := make(map[string]json.RawMessage, 4)
	var buf []byte
	_ = rawjson.EachMember(raw, func(k, v []byte) {
		buf = rawjson.AppendKey(buf[:0], k)
		m[string(buf)] = v
	})
	return m, slices.Sorted(maps.Keys(m))
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
	if rawjson.Kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// parseMessage validates sendMessage's message param as BAE reads it,
// {role?: string, content: any JSON} with role defaulting to "user"
// (BAE's client API step 3). Like serde, it also takes the array form
// [role, content].
func parseMessage(raw json.RawMessage) (baton.Message, error) {
	if raw == nil {
		return baton.Message{}, invalid(`missing "message"`)
	}
	const name = "struct MessageBody"
	msg := baton.Message{Role: "user"}
	switch rawjson.Kind(raw) {
	case '{':
		m, keys := object(raw)
		for _, k := range keys {
			if k == "role" {
				s, ok := stringValue(m[k])
				if !ok {
					return baton.Message{}, invalid("%s", serde.InvalidType(m[k], "a string"))
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
			return baton.Message{}, invalid("%s", serde.InvalidType(elems[0], "a string"))
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
		return baton.Message{}, invalid("%s", serde.InvalidType(raw, name))
	}
	return msg, nil
}

// parseClientTools validates updateClientTools' tools param as BAE reads
// it, an array of {name: string, description?: string|null,
// input_schema?: any} with non-blank names (BAE's client API). serde would
// also take a tool as the array [name, description, input_schema], which
// BAE then stores and advertises as that array; Baton refuses it.
func parseClientTools(raw json.RawMessage) ([]baton.ToolDef, error) {
	if raw == nil {
		return nil, invalid(`missing "tools"`)
	}
	if rawjson.Kind(raw) != '[' {
		return nil, invalid("%s", serde.InvalidType(raw, "a sequence"))
	}
	elems := elements(raw)
	tools := make([]baton.ToolDef, len(elems))
	for i, el := range elems {
		if rawjson.Kind(el) != '{' {
			return nil, invalid("%s", serde.InvalidType(el, "struct ClientToolDef"))
		}
		m, keys := object(el)
		t := &tools[i]
		t.InputSchema = json.RawMessage(`{}`)
		for _, k := range keys {
			v := m[k]
			switch k {
			case "description":
				if rawjson.Kind(v) == 'n' {
					continue
				}
				s, ok := stringValue(v)
				if !ok {
					return nil, invalid("%s", serde.InvalidType(v, "a string"))
				}
				t.Description = &s
			case "input_schema":
				if rawjson.Kind(v) != 'n' {
					t.InputSchema = v
				}
			case "name":
				s, ok := stringValue(v)
				if !ok {
					return nil, invalid("%s", serde.InvalidType(v, "a string"))
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
