package openai

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func msg(role, content string) baton.Message {
	return baton.Message{Role: role, Content: json.RawMessage(content)}
}

func TestTranslateMessages(t *testing.T) {
	tests := []struct {
		name   string
		system string
		in     []baton.Message
		want   string // the messages array
	}{
		{
			name: "string content",
			in:   []baton.Message{msg("user", `"hi <there>"`), msg("assistant", `"hello"`)},
			want: `[{"role":"user","content":"hi <there>"},{"role":"assistant","content":"hello"}]`,
		},
		{
			name:   "system prompt leads",
			system: "Be terse.",
			in:     []baton.Message{msg("user", `"hi"`)},
			want:   `[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]`,
		},
		{
			name: "assistant text and tool_use",
			in: []baton.Message{msg("assistant", `[{"type":"text","text":"a"},{"type":"thinking","thinking":"x"},{"type":"text","text":"b"},`+
				`{"type":"tool_use","id":"t1","name":"f","input":{"x": [1, "y"]}},{"type":"tool_use","id":"t2","name":"g"}]`)},
			want: `[{"role":"assistant","content":"a\nb","tool_calls":[` +
				`{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"x\":[1,\"y\"]}"}},` +
				`{"id":"t2","type":"function","function":{"name":"g","arguments":"{}"}}]}]`,
		},
		{
			name: "assistant tool_use only has null content",
			in:   []baton.Message{msg("assistant", `[{"type":"tool_use","id":"t1","name":"f","input":null}]`)},
			want: `[{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`,
		},
		{
			name: "assistant text only has no tool_calls",
			in:   []baton.Message{msg("assistant", `[{"type":"text","text":"just text"}]`)},
			want: `[{"role":"assistant","content":"just text"}]`,
		},
		{
			name: "assistant empty array",
			in:   []baton.Message{msg("assistant", `[]`)},
			want: `[{"role":"assistant","content":null}]`,
		},
		{
			name: "tool results then text",
			in: []baton.Message{msg("user", `[`+
				`{"type":"tool_result","tool_use_id":"t1","content":"sunny","is_error":false},`+
				`{"type":"text","text":"and"},`+
				`{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"l1"},{"type":"image","source":{}},{"type":"text","text":"l2"}]},`+
				`{"type":"tool_result","tool_use_id":"t3","content":[{"type":"image","source":{"data":"x"}}]},`+
				`{"type":"tool_result","tool_use_id":"t4","content":null},`+
				`{"type":"tool_result","tool_use_id":"t5"},`+
				`{"type":"tool_result","content":{"k":1}},`+
				`{"type":"text","text":"more"}]`)},
			want: `[` +
				`{"role":"tool","tool_call_id":"t1","content":"sunny"},` +
				`{"role":"tool","tool_call_id":"t2","content":"l1\nl2"},` +
				`{"role":"tool","tool_call_id":"t3","content":"[{\"type\":\"image\",\"source\":{\"data\":\"x\"}}]"},` +
				`{"role":"tool","tool_call_id":"t4","content":""},` +
				`{"role":"tool","tool_call_id":"t5","content":""},` +
				`{"role":"tool","tool_call_id":"","content":"{\"k\":1}"},` +
				`{"role":"user","content":"and\nmore"}]`,
		},
		{
			name: "user text blocks joined",
			in:   []baton.Message{msg("user", `[{"type":"text","text":"one"},{"type":"text","text":"two"}]`)},
			want: `[{"role":"user","content":"one\ntwo"}]`,
		},
		{
			name: "user blocks without text or results send nothing",
			in:   []baton.Message{msg("user", `[{"type":"image","source":{}}, 5, "x"]`), msg("user", `"next"`)},
			want: `[{"role":"user","content":"next"}]`,
		},
		{
			name: "other content is empty",
			in:   []baton.Message{msg("user", `null`), {Role: "user"}, msg("assistant", `{"a":1}`), msg("user", `7`)},
			want: `[{"role":"user","content":""},{"role":"user","content":""},{"role":"assistant","content":""},{"role":"user","content":""}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, err := translateMessages(tt.system, tt.in)
			if err != nil {
				t.Fatalf("translateMessages: %v", err)
			}
			got, err := encode(msgs)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("messages:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestTranslateMessagesInvalid(t *testing.T) {
	for _, c := range []string{`"unterminated`, `[{"type":"text"`} {
		if _, err := translateMessages("", []baton.Message{msg("user", c)}); err == nil {
			t.Errorf("content %s accepted", c)
		}
	}
}

func TestTranslateTools(t *testing.T) {
	got, err := encode(translateTools([]json.RawMessage{
		json.RawMessage(`{"name":"get_weather","description":"Weather <now>","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}`),
		json.RawMessage(`{"name":"no_desc","input_schema":null}`),
		json.RawMessage(`{"name":"null_desc","description":null}`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `[` +
		`{"type":"function","function":{"name":"get_weather","description":"Weather <now>","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},` +
		`{"type":"function","function":{"name":"no_desc","parameters":{}}},` +
		`{"type":"function","function":{"name":"null_desc","parameters":{}}}]`
	if string(got) != want {
		t.Errorf("tools:\n got %s\nwant %s", got, want)
	}
}

func TestTranslateResponse(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		content string
		usage   *baton.Usage
		detail  string // a failure's Detail
	}{
		{
			name:    "text",
			body:    `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi <b>"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
			content: `[{"type":"text","text":"Hi <b>"}]`,
			usage:   &baton.Usage{InputTokens: 9, OutputTokens: 3},
		},
		{
			name: "tool calls",
			body: `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},` +
				`{"id":"call_2","type":"function","function":{"name":"g","arguments":"  "}},` +
				`{"type":"function","function":{"name":"h","arguments":{"direct":true}}},` +
				`{"id":"call_4","function":{"name":"i"}}]}}]}`,
			content: `[{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}},{"type":"tool_use","id":"call_2","name":"g","input":{}},` +
				`{"type":"tool_use","id":null,"name":"h","input":{"direct":true}},{"type":"tool_use","id":"call_4","name":"i","input":{}}]`,
		},
		{
			name:    "text and tool call",
			body:    `{"choices":[{"message":{"content":"Checking.","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`,
			content: `[{"type":"text","text":"Checking."},{"type":"tool_use","id":"c","name":"f","input":{}}]`,
		},
		{
			name:    "empty content",
			body:    `{"choices":[{"message":{"content":""}}],"usage":null}`,
			content: `[]`,
		},
		{name: "no choices", body: `{"id":"x"}`, detail: "provider response is missing choices[0].message"},
		{name: "empty choices", body: `{"choices":[]}`, detail: "provider response is missing choices[0].message"},
		{name: "null message", body: `{"choices":[{"message":null}]}`, detail: "provider response is missing choices[0].message"},
		{name: "not an object", body: `[1]`, detail: "provider response is missing choices[0].message"},
		{
			name:   "unparsable arguments",
			body:   `{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`,
			detail: "provider response tool_calls[0] arguments are not valid JSON: unexpected end of JSON input",
		},
		{
			name:   "missing name",
			body:   `{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}}]}`,
			detail: "provider response tool_calls[0] is missing function.name",
		},
		{
			name:   "tool_calls not an array",
			body:   `{"choices":[{"message":{"tool_calls":{"id":"c"}}}]}`,
			detail: "provider response tool_calls is not an array of tool calls",
		},
		{name: "non-JSON", body: `<html>`, detail: "provider returned non-JSON body: invalid character '<' looking for beginning of value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, usage, err := translateResponse(200, []byte(tt.body))
			if tt.detail != "" {
				var pe *baton.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a ProviderError", err)
				}
				want := baton.ProviderError{Status: 200, Detail: tt.detail, Body: tt.body}
				if diff := cmp.Diff(want, *pe); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("translateResponse: %v", err)
			}
			if string(content) != tt.content {
				t.Errorf("content:\n got %s\nwant %s", content, tt.content)
			}
			if diff := cmp.Diff(tt.usage, usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzOpenAIResponse(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\":[1]}"}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":" "}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"k":"v"}}}]}}]}`,
		`{"choices":[]}`,
		`not json`,
		`{"choices":[{"message":{"content":"\ud83d"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		content, _, err := translateResponse(201, body)
		if err != nil {
			var pe *baton.ProviderError
			if !errors.As(err, &pe) || pe.Status != 201 || pe.Retryable {
				t.Fatalf("err = %#v, want a non-retryable ProviderError with the status", err)
			}
			return
		}
		var blocks []struct {
			Type  string          `json:"type"`
			Text  *string         `json:"text"`
			Name  *string         `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(content, &blocks); err != nil {
			t.Fatalf("content %s: %v", content, err)
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					t.Fatalf("empty text block in %s", content)
				}
			case "tool_use":
				if b.Name == nil || !json.Valid(b.Input) || len(b.Input) == 0 {
					t.Fatalf("bad tool_use block in %s", content)
				}
			default:
				t.Fatalf("unexpected block type %q", b.Type)
			}
		}
	})
}
