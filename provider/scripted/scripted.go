// Package scripted is Baton's deterministic offline model (provider kind
// "scripted"). It needs no network and no key, so `baton dev`, demos and
// tests can run whole agent turns, tool calls included, anywhere.
//
// The reply depends only on the request. The rules, first match wins:
//
//  1. Tool results. When the last message is a user message holding
//     tool_result blocks, the reply is one text block with a line per
//     result, "<tool> returned: <text>" or, for an is_error result,
//     "<tool> failed: <text>". The tool name comes from the tool_use block
//     with the same id in an earlier assistant message; text is the
//     result's string content or its text blocks joined by "\n".
//
//  2. Commands. The last user text (string content, or its text blocks
//     joined by "\n"), trimmed, is one of the commands listed below.
//
//  3. Call lines. Every line of the form
//
//     call <tool> [<JSON object>]
//
//     becomes, in order, a tool_use block calling <tool> with the object
//     (or {}) as input, when <tool> is an advertised tool; several lines
//     make parallel calls in one reply. A line naming a tool that is not
//     advertised becomes the text "I don't have a tool named <tool>.",
//     one whose input is not a JSON object the text "The input for <tool>
//     must be a JSON object." tool_use ids are "toolu_" and 24 hex digits
//     derived from the conversation's length and the call's position, so
//     a conversation always gets the same ids.
//
//  4. Mentions. When the text mentions an advertised tool's name as a
//     word ("please roll_dice"), the first such tool in advertised order
//     is called with {}.
//
//  5. Echo. Otherwise the reply is "You said: <text>", or "Hello from
//     Baton's scripted model." when the text is empty.
//
// The commands:
//
//	/fail     fail like an HTTP 500, not retryable (demos show failover)
//	/slow     block until the call's context is done (timeouts, cancels)
//	/system   reply "system: <system prompt>" ("No system prompt is set.")
//
// The response Body is an Anthropic Messages-shaped message whose usage
// counts words: input over the system prompt and every text of the
// conversation, output over the reply's text, one per tool_use. Text
// reaches ProviderRequest.OnDelta in chunks of a few words.
package scripted

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/provider"
)

// Model is the scripted model. It holds no state and is safe for
// concurrent use.
type Model struct{}

var _ baton.Provider = (*Model)(nil)

// New returns the scripted model.
func New() *Model { return &Model{} }

// part is a content block as the model reads it; raw fields keep a block
// of unexpected shape from failing the decode.
type part struct {
	Type      string          `json:"type"`
	Text      json.RawMessage `json:"text"`
	ID        json.RawMessage `json:"id"`
	Name      json.RawMessage `json:"name"`
	ToolUseID json.RawMessage `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// reply is the content being built.
type reply struct {
	blocks []any
	calls  int
	words  int
}

type toolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"` // always nil: see splice
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

// Call answers req by the package's rules. The token is ignored.
func (m *Model) Call(ctx context.Context, entry *baton.ProviderEntry, _ string, req *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, provider.TransportError(0, err)
	}
	msgs := req.Messages
	var r reply
	if results := toolResults(msgs); len(results) > 0 {
		r.text(summary(msgs, results))
	} else {
		text := strings.TrimSpace(lastUserText(msgs))
		switch text {
		case "/fail":
			return nil, &baton.ProviderError{Status: 500, Detail: "provider returned HTTP 500"}
		case "/slow":
			<-ctx.Done()
			return nil, provider.TransportError(0, ctx.Err())
		case "/system":
			if req.System == "" {
				r.text("No system prompt is set.")
			} else {
				r.text("system: " + req.System)
			}
		default:
			m.respond(&r, len(msgs), text, toolNames(req.Tools))
		}
	}
	return r.response(entry, req)
}

// respond applies rules 3 to 5.
func (m *Model) respond(r *reply, turn int, text string, tools []string) {
	for line := range strings.Lines(text) {
		name, arg, ok := callLine(strings.TrimSuffix(line, "\n"))
		if !ok {
			continue
		}
		switch {
		case !contains(tools, name):
			r.text("I don't have a tool named " + name + ".")
		case arg == "":
			r.call(turn, name, json.RawMessage("{}"))
		default:
			input, ok := object(arg)
			if !ok {
				r.text("The input for " + name + " must be a JSON object.")
				continue
			}
			r.call(turn, name, input)
		}
	}
	if len(r.blocks) > 0 {
		return
	}
	for _, name := range tools {
		if mentions(text, name) {
			r.call(turn, name, json.RawMessage("{}"))
			return
		}
	}
	if text == "" {
		r.text("Hello from Baton's scripted model.")
		return
	}
	r.text("You said: " + text)
}

func (r *reply) text(s string) {
	r.blocks = append(r.blocks, baton.TextBlock{Type: baton.BlockText, Text: s})
	r.words += words(s)
}

func (r *reply) call(turn int, name string, input json.RawMessage) {
	r.blocks = append(r.blocks, toolUse{Type: baton.BlockToolUse, ID: "toolu_" + digest(fmt.Sprintf("call/%d/%d", turn, r.calls)), Name: name, Input: input})
	r.calls++
	r.words++
}

// response renders the reply and streams its text to OnDelta.
func (r *reply) response(entry *baton.ProviderEntry, req *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	model := req.Model
	if model == "" && entry != nil {
		model = entry.Model
	}
	if model == "" {
		model = "scripted"
	}
	stop := provider.StopEndTurn
	if r.calls > 0 {
		stop = provider.StopToolUse
	}
	u := usage{InputTokens: inputWords(req), OutputTokens: r.words}
	msg := message{
		ID:         "msg_" + digest(fmt.Sprintf("message/%d", len(req.Messages))),
		Type:       "message",
		Role:       "assistant",
		Model:      model,
		StopReason: stop,
		Usage:      u,
	}
	content, err := encodeBlocks(r.blocks)
	if err != nil {
		return nil, &baton.ProviderError{Detail: "scripted model: " + err.Error()}
	}
	body, err := encode(msg) // with "content":null, spliced in below
	if err != nil {
		return nil, &baton.ProviderError{Detail: "scripted model: " + err.Error()}
	}
	body = splice(body, content)
	if req.OnDelta != nil {
		for _, b := range r.blocks {
			if t, ok := b.(baton.TextBlock); ok {
				for _, c := range chunks(t.Text) {
					req.OnDelta(c)
				}
			}
		}
	}
	return &baton.ProviderResponse{
		Content: content,
		Body:    body,
		Usage:   &baton.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens},
	}, nil
}

// toolResults returns the tool_result blocks of the last message when it is
// a user message.
func toolResults(msgs []baton.Message) []part {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return nil
	}
	var out []part
	for _, p := range parts(msgs[len(msgs)-1].Content) {
		if p.Type == "tool_result" {
			out = append(out, p)
		}
	}
	return out
}

// summary is rule 1's text.
func summary(msgs []baton.Message, results []part) string {
	lines := make([]string, 0, len(results))
	for _, res := range results {
		id := str(res.ToolUseID)
		name := toolName(msgs[:len(msgs)-1], id)
		if name == "" {
			name = id
		}
		verb := " returned: "
		if res.IsError {
			verb = " failed: "
		}
		lines = append(lines, strings.TrimRight(name+verb+contentText(res.Content), " "))
	}
	return strings.Join(lines, "\n")
}

// toolName finds the name of the tool_use with id in the latest assistant
// message holding it.
func toolName(msgs []baton.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		for _, p := range parts(msgs[i].Content) {
			if p.Type == "tool_use" && str(p.ID) == id {
				return str(p.Name)
			}
		}
	}
	return ""
}

// lastUserText is the text of the last user message.
func lastUserText(msgs []baton.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return contentText(msgs[i].Content)
		}
	}
	return ""
}

// contentText is string content, or the text blocks joined by "\n".
func contentText(content json.RawMessage) string {
	if s := str(content); s != "" {
		return s
	}
	var texts []string
	for _, p := range parts(content) {
		if p.Type == "text" {
			texts = append(texts, str(p.Text))
		}
	}
	return strings.Join(texts, "\n")
}

// parts decodes a block array; anything else has no blocks.
func parts(content json.RawMessage) []part {
	var raws []json.RawMessage
	if json.Unmarshal(content, &raws) != nil {
		return nil
	}
	out := make([]part, 0, len(raws))
	for _, r := range raws {
		var p part
		if json.Unmarshal(r, &p) == nil {
			out = append(out, p)
		}
	}
	return out
}

// toolNames lists the advertised tools' names in order.
func toolNames(tools []json.RawMessage) []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		var def struct {
			Name json.RawMessage `json:"name"`
		}
		if json.Unmarshal(t, &def) == nil {
			if n := str(def.Name); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// callLine parses "call <tool> [<arg>]".
func callLine(line string) (name, arg string, ok bool) {
	line = strings.TrimSpace(line)
	rest, found := strings.CutPrefix(line, "call")
	if !found || rest == "" || !unicode.IsSpace(rune(rest[0])) {
		return "", "", false
	}
	rest = strings.TrimSpace(rest)
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		name, arg = rest[:i], rest[i:]
	} else {
		name, arg = rest, ""
	}
	return name, strings.TrimSpace(arg), name != ""
}

// object returns arg compacted when it is a JSON object.
func object(arg string) (json.RawMessage, bool) {
	var buf bytes.Buffer
	if !strings.HasPrefix(arg, "{") || json.Compact(&buf, []byte(arg)) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// mentions reports whether name occurs in text as a whole word: not
// preceded or followed by a letter, digit, '_' or '-'.
func mentions(text, name string) bool {
	for i := 0; i <= len(text)-len(name); {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !wordByte(text[start-1])) && (end == len(text) || !wordByte(text[end])) {
			return true
		}
		i = start + 1
	}
	return false
}

func wordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// inputWords counts the words of the system prompt and of every text in
// the conversation.
func inputWords(req *baton.ProviderRequest) int {
	n := words(req.System)
	for _, m := range req.Messages {
		if s := str(m.Content); s != "" {
			n += words(s)
			continue
		}
		for _, p := range parts(m.Content) {
			switch p.Type {
			case "text":
				n += words(str(p.Text))
			case "tool_result":
				n += words(contentText(p.Content))
			}
		}
	}
	return n
}

// chunks splits s into pieces of up to three words, whitespace kept, so
// that they join back into s.
func chunks(s string) []string {
	var out []string
	words, start := 0, 0
	for i := 1; i < len(s); i++ {
		if unicode.IsSpace(rune(s[i-1])) && !unicode.IsSpace(rune(s[i])) {
			words++
			if words == 3 {
				out = append(out, s[start:i])
				start, words = i, 0
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// str returns raw as a Go string when it is a JSON string, else "".
func str(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// digest is 24 hex digits derived from s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

// encode returns the JSON of v without HTML escaping.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// encodeBlocks is encode(blocks), with text blocks appended directly: a
// reply that echoes a long message is then written once, not grown by
// doubling in encoding/json's buffer and copied out of it.
func encodeBlocks(blocks []any) ([]byte, error) {
	if blocks == nil {
		return encode(blocks)
	}
	n := 2
	for _, b := range blocks {
		if t, ok := b.(baton.TextBlock); ok {
			n += 32 + len(t.Text) + len(t.Text)/8
		} else {
			n += 256
		}
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, b := range blocks {
		if i > 0 {
			out = append(out, ',')
		}
		t, ok := b.(baton.TextBlock)
		if !ok {
			one, err := encode(b)
			if err != nil {
				return nil, err
			}
			out = append(out, one...)
			continue
		}
		out = append(out, `{"type":`...)
		out = rawjson.AppendString(out, t.Type, false)
		out = append(out, `,"text":`...)
		out = rawjson.AppendString(out, t.Text, false)
		out = append(out, '}')
	}
	return append(out, ']'), nil
}

// splice puts content, already encoded, in place of a message body's
// "content":null, so a long reply is encoded once, not once for the
// canonical content and again for the body. The other members are
// strings and numbers, in which the quotes of "content" would be escaped.
func splice(body, content []byte) []byte {
	const key = `"content":null`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return body
	}
	out := make([]byte, 0, len(body)-len("null")+len(content))
	out = append(out, body[:i+len(key)-len("null")]...)
	out = append(out, content...)
	return append(out, body[i+len(key):]...)
}

// words counts the whitespace-separated words of s, as
// len(strings.Fields(s)) would, without building them.
func words(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}
