package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// ours returns the tool calls of m this client must answer: dispatch
// "client", or no dispatch (a server predating the field) and a locally
// registered name. Other blocks were dispatched by the server.
func (s *Session) ours(m Message) []ToolCall {
	var out []ToolCall
	for _, c := range m.ToolCalls() {
		switch c.Dispatch {
		case DispatchClient:
			out = append(out, c)
		case "":
			if _, ok := s.h.handler(c.Name); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// runTools runs the handlers of calls concurrently and returns their
// results in call order. Hooks run on the calling goroutine, in order.
func (s *Session) runTools(ctx context.Context, calls []ToolCall) []ToolResult {
	ctx = context.WithValue(ctx, sessionKey{}, s)
	hk := s.h.snapshotHooks()
	if hk.call != nil {
		for _, c := range calls {
			hk.call(c)
		}
	}
	results := make([]ToolResult, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			results[i], errs[i] = s.runTool(ctx, c)
		})
	}
	wg.Wait()
	for i, c := range calls {
		if hk.result != nil {
			hk.result(c, results[i])
		}
		if errs[i] != nil && hk.err != nil {
			hk.err(errs[i])
		}
	}
	return results
}

// runTool runs one handler, turning an error, a panic or a missing
// handler into an is_error result and a *ToolError.
func (s *Session) runTool(ctx context.Context, c ToolCall) (res ToolResult, terr error) {
	res.ToolUseID = c.ID
	fail := func(err error) {
		terr = &ToolError{Call: c, Err: err}
		res.Content, _ = json.Marshal(err.Error())
		res.IsError = true
	}
	fn, ok := s.h.handler(c.Name)
	if !ok {
		fail(fmt.Errorf("no handler registered for tool %q", c.Name))
		return res, terr
	}
	defer func() {
		if p := recover(); p != nil {
			fail(fmt.Errorf("handler panicked: %v", p))
		}
	}()
	input := c.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	v, err := fn(ctx, input)
	if err != nil {
		fail(err)
		return res, terr
	}
	content, err := resultContent(v)
	if err != nil {
		fail(err)
		return res, terr
	}
	res.Content = content
	return res, nil
}

// resultContent encodes a handler's result as tool_result content.
func resultContent(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return json.RawMessage(`""`), nil
	case string:
		return json.Marshal(v)
	case []Block:
		return json.Marshal(v)
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, errors.New("handler returned invalid JSON")
		}
		return json.Marshal(string(compact(v)))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return json.Marshal(string(b))
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// userMessage builds the message Send sends for content.
func userMessage(content any) (Message, error) {
	m := Message{Role: "user"}
	var raw json.RawMessage
	var err error
	switch v := content.(type) {
	case string:
		raw, err = json.Marshal(v)
	case json.RawMessage:
		if !json.Valid(v) {
			return m, errors.New("client: content is not valid JSON")
		}
		raw = v
	case Message:
		if v.Role != "" {
			m.Role = v.Role
		}
		if !json.Valid(v.Content) {
			return m, errors.New("client: message content is not valid JSON")
		}
		raw = v.Content
	case []ToolResult:
		bs := make([]Block, len(v))
		for i, r := range v {
			bs[i] = r.block()
		}
		raw, err = json.Marshal(bs)
	default:
		raw, err = json.Marshal(v)
	}
	if err != nil {
		return m, fmt.Errorf("client: encode content: %w", err)
	}
	m.Content = stripDispatch(raw)
	return m, nil
}

// stripDispatch removes the dispatch member of tool_use blocks in an array
// content, keeping every other member; other content is returned as is.
func stripDispatch(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' || !bytes.Contains(t, []byte(`"dispatch"`)) {
		return raw
	}
	var items []json.RawMessage
	if json.Unmarshal(t, &items) != nil {
		return raw
	}
	changed := false
	for i, it := range items {
		if !bytes.Contains(it, []byte(`"dispatch"`)) {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(it, &m) != nil {
			continue
		}
		var typ string
		if _, ok := m["dispatch"]; !ok || json.Unmarshal(m["type"], &typ) != nil || typ != "tool_use" {
			continue
		}
		delete(m, "dispatch")
		b, err := json.Marshal(m)
		if err != nil {
			continue
		}
		items[i], changed = b, true
	}
	if !changed {
		return raw
	}
	b, err := json.Marshal(items)
	if err != nil {
		return raw
	}
	return b
}
