package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var entry = &baton.ProviderEntry{Name: "scripted", Provider: baton.ProviderScripted, Model: "scripted"}

func user(content string) baton.Message {
	return baton.Message{Role: "user", Content: json.RawMessage(content)}
}

func assistant(content string) baton.Message {
	return baton.Message{Role: "assistant", Content: json.RawMessage(content)}
}

func tools(names ...string) []json.RawMessage {
	var out []json.RawMessage
	for _, n := range names {
		out = append(out, json.RawMessage(`{"name":"`+n+`","description":"d","input_schema":{"type":"object"}}`))
	}
	return out
}

// id is the tool_use id of call i in a conversation of n messages.
func id(n, i int) string {
	return "toolu_" + digest("call/"+strconv.Itoa(n)+"/"+strconv.Itoa(i))
}

func TestGrammar(t *testing.T) {
	tests := []struct {
		name    string
		system  string
		msgs    []baton.Message
		tools   []json.RawMessage
		content string
	}{
		{
			name:    "echo",
			msgs:    []baton.Message{user(`"  hello there  "`)},
			content: `[{"type":"text","text":"You said: hello there"}]`,
		},
		{
			name:    "echo joins text blocks and ignores others",
			msgs:    []baton.Message{user(`[{"type":"text","text":"one"},{"type":"image","source":{}},{"type":"text","text":"two"}]`)},
			content: `[{"type":"text","text":"You said: one\ntwo"}]`,
		},
		{
			name:    "empty text",
			msgs:    []baton.Message{user(`"   "`)},
			content: `[{"type":"text","text":"Hello from Baton's scripted model."}]`,
		},
		{
			name:    "no messages",
			content: `[{"type":"text","text":"Hello from Baton's scripted model."}]`,
		},
		{
			name:    "echo reads the last user message",
			msgs:    []baton.Message{user(`"first"`), assistant(`"reply"`), user(`"<second> & more"`)},
			content: `[{"type":"text","text":"You said: <second> & more"}]`,
		},
		{
			name:    "system prompt does not change the echo",
			system:  "Be nice.",
			msgs:    []baton.Message{user(`"hi"`)},
			content: `[{"type":"text","text":"You said: hi"}]`,
		},
		{
			name:    "/system",
			system:  "Be nice.",
			msgs:    []baton.Message{user(`" /system "`)},
			content: `[{"type":"text","text":"system: Be nice."}]`,
		},
		{
			name:    "/system without a prompt",
			msgs:    []baton.Message{user(`"/system"`)},
			content: `[{"type":"text","text":"No system prompt is set."}]`,
		},
		{
			name:    "call with input",
			msgs:    []baton.Message{user(`"call roll_dice {\"sides\": 6, \"note\": \"<d6>\"}"`)},
			tools:   tools("roll_dice"),
			content: `[{"type":"tool_use","id":"` + id(1, 0) + `","name":"roll_dice","input":{"sides":6,"note":"<d6>"}}]`,
		},
		{
			name:    "call without input",
			msgs:    []baton.Message{user(`"call\troll_dice"`)},
			tools:   tools("roll_dice"),
			content: `[{"type":"tool_use","id":"` + id(1, 0) + `","name":"roll_dice","input":{}}]`,
		},
		{
			name: "parallel calls, other lines ignored",
			msgs: []baton.Message{user(`"x"`), assistant(`"y"`),
				user(`"Let's go:\n  call get_time\nsome chatter\ncall roll_dice {\"sides\":20}\ncall get_time {}"`)},
			tools: tools("roll_dice", "get_time"),
			content: `[{"type":"tool_use","id":"` + id(3, 0) + `","name":"get_time","input":{}},` +
				`{"type":"tool_use","id":"` + id(3, 1) + `","name":"roll_dice","input":{"sides":20}},` +
				`{"type":"tool_use","id":"` + id(3, 2) + `","name":"get_time","input":{}}]`,
		},
		{
			name:    "call of a tool not advertised",
			msgs:    []baton.Message{user(`"call launch_rockets {}"`)},
			tools:   tools("roll_dice"),
			content: `[{"type":"text","text":"I don't have a tool named launch_rockets."}]`,
		},
		{
			name:  "bad input and a good call in one reply",
			msgs:  []baton.Message{user(`"call roll_dice [1]\ncall roll_dice {bad\ncall roll_dice {\"ok\":true}"`)},
			tools: tools("roll_dice"),
			content: `[{"type":"text","text":"The input for roll_dice must be a JSON object."},` +
				`{"type":"text","text":"The input for roll_dice must be a JSON object."},` +
				`{"type":"tool_use","id":"` + id(1, 0) + `","name":"roll_dice","input":{"ok":true}}]`,
		},
		{
			name:    "calling is not a call line",
			msgs:    []baton.Message{user(`"calling roll_dice2"`)},
			tools:   tools("roll_dice"),
			content: `[{"type":"text","text":"You said: calling roll_dice2"}]`,
		},
		{
			name:    "mention calls the tool",
			msgs:    []baton.Message{user(`"please roll_dice."`)},
			tools:   tools("roll_dice"),
			content: `[{"type":"tool_use","id":"` + id(1, 0) + `","name":"roll_dice","input":{}}]`,
		},
		{
			name:    "mention picks the first advertised tool",
			msgs:    []baton.Message{user(`"get_time, then roll_dice"`)},
			tools:   tools("roll_dice", "get_time"),
			content: `[{"type":"tool_use","id":"` + id(1, 0) + `","name":"roll_dice","input":{}}]`,
		},
		{
			name:    "a name inside a longer word is no mention",
			msgs:    []baton.Message{user(`"roll_dice_fast or myroll_dice or roll_dice-2"`)},
			tools:   tools("roll_dice"),
			content: `[{"type":"text","text":"You said: roll_dice_fast or myroll_dice or roll_dice-2"}]`,
		},
		{
			name: "tool results are summarized",
			msgs: []baton.Message{
				user(`"call roll_dice"`),
				assistant(`[{"type":"text","text":"rolling"},{"type":"tool_use","id":"t1","name":"roll_dice","input":{}},{"type":"tool_use","id":"t2","name":"get_time","input":{}}]`),
				user(`[{"type":"tool_result","tool_use_id":"t1","content":"4"},` +
					`{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"12:00"},{"type":"text","text":"UTC"}],"is_error":false},` +
					`{"type":"tool_result","tool_use_id":"t9","content":"boom","is_error":true},` +
					`{"type":"text","text":"call roll_dice"}]`),
			},
			tools:   tools("roll_dice"),
			content: `[{"type":"text","text":"roll_dice returned: 4\nget_time returned: 12:00\nUTC\nt9 failed: boom"}]`,
		},
		{
			name: "tool names come from the latest assistant message",
			msgs: []baton.Message{
				assistant(`[{"type":"tool_use","id":"t1","name":"old","input":{}}]`),
				user(`"again"`),
				assistant(`[{"type":"tool_use","id":"t1","name":"new","input":{}}]`),
				user(`[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{}}],"is_error":true}]`),
			},
			content: `[{"type":"text","text":"new failed:"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := New().Call(context.Background(), entry, "", &baton.ProviderRequest{
				System: tt.system, Messages: tt.msgs, Tools: tt.tools,
			})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if string(resp.Content) != tt.content {
				t.Errorf("Content:\n got %s\nwant %s", resp.Content, tt.content)
			}
			var body struct {
				Content    json.RawMessage `json:"content"`
				StopReason string          `json:"stop_reason"`
			}
			if err := json.Unmarshal(resp.Body, &body); err != nil {
				t.Fatalf("Body: %v", err)
			}
			if string(body.Content) != tt.content {
				t.Errorf("Body content %s differs from Content", body.Content)
			}
			wantStop := "end_turn"
			if strings.Contains(tt.content, `"tool_use"`) {
				wantStop = "tool_use"
			}
			if body.StopReason != wantStop {
				t.Errorf("stop_reason = %q, want %q", body.StopReason, wantStop)
			}
		})
	}
}

func TestBodyAndUsage(t *testing.T) {
	req := &baton.ProviderRequest{
		Model:  "scripted-x",
		System: "Two words.",
		Messages: []baton.Message{
			user(`"one two three"`),
			assistant(`[{"type":"text","text":"four five"},{"type":"tool_use","id":"t","name":"n","input":{}}]`),
			user(`[{"type":"tool_result","tool_use_id":"t","content":"six"},{"type":"text","text":"seven eight"}]`),
		},
	}
	resp, err := New().Call(context.Background(), entry, "", req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"msg_` + digest("message/3") + `","type":"message","role":"assistant","model":"scripted-x",` +
		`"content":[{"type":"text","text":"n returned: six"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":10,"output_tokens":3}}`
	if string(resp.Body) != want {
		t.Errorf("Body:\n got %s\nwant %s", resp.Body, want)
	}
	if diff := cmp.Diff(&baton.Usage{InputTokens: 10, OutputTokens: 3}, resp.Usage); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}

	// A tool_use counts one output token; the model defaults to the entry's.
	resp, err = New().Call(context.Background(), entry, "", &baton.ProviderRequest{
		Messages: []baton.Message{user(`"call a\ncall b"`)}, Tools: tools("a", "b"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.OutputTokens != 2 || !strings.Contains(string(resp.Body), `"model":"scripted"`) {
		t.Errorf("usage %+v, body %s", resp.Usage, resp.Body)
	}
}

func TestDeterministicIDs(t *testing.T) {
	call := func(msgs ...baton.Message) string {
		resp, err := New().Call(context.Background(), entry, "", &baton.ProviderRequest{Messages: msgs, Tools: tools("a")})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Body)
	}
	first := call(user(`"call a\ncall a"`))
	if again := call(user(`"call a\ncall a"`)); again != first {
		t.Errorf("same conversation, different replies:\n%s\n%s", first, again)
	}
	ids := regexp.MustCompile(`"(toolu_[0-9a-f]{24})"`).FindAllStringSubmatch(first, -1)
	if len(ids) != 2 || ids[0][1] == ids[1][1] {
		t.Fatalf("want two distinct toolu_ ids, got %v in %s", ids, first)
	}
	later := call(user(`"x"`), assistant(`"y"`), user(`"call a\ncall a"`))
	if strings.Contains(later, ids[0][1]) || strings.Contains(later, ids[1][1]) {
		t.Errorf("a longer conversation reuses ids: %s", later)
	}
}

func TestOnDelta(t *testing.T) {
	var chunks []string
	resp, err := New().Call(context.Background(), entry, "", &baton.ProviderRequest{
		Messages: []baton.Message{user(`"the quick brown fox jumps over the lazy dog"`)},
		OnDelta:  func(s string) { chunks = append(chunks, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 3 {
		t.Errorf("OnDelta got %d chunks, want a few: %q", len(chunks), chunks)
	}
	if got := strings.Join(chunks, ""); got != "You said: the quick brown fox jumps over the lazy dog" {
		t.Errorf("chunks join to %q", got)
	}
	if !strings.Contains(string(resp.Content), strings.Join(chunks, "")) {
		t.Errorf("content %s does not hold the streamed text", resp.Content)
	}

	chunks = nil
	_, err = New().Call(context.Background(), entry, "", &baton.ProviderRequest{
		Messages: []baton.Message{user(`"call a"`)}, Tools: tools("a"),
		OnDelta: func(s string) { chunks = append(chunks, s) },
	})
	if err != nil || len(chunks) != 0 {
		t.Errorf("a tool-only reply streamed %q (err %v)", chunks, err)
	}
}

func TestFail(t *testing.T) {
	_, err := New().Call(context.Background(), entry, "", &baton.ProviderRequest{Messages: []baton.Message{user(`"/fail"`)}})
	var pe *baton.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a ProviderError", err)
	}
	want := baton.ProviderError{Status: 500, Detail: "provider returned HTTP 500"}
	if diff := cmp.Diff(want, *pe); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

// watchedCtx reports when its Done channel is first asked for, so a test
// knows the call is waiting on it.
type watchedCtx struct {
	context.Context
	asked chan struct{}
}

func (c *watchedCtx) Done() <-chan struct{} {
	select {
	case <-c.asked:
	default:
		close(c.asked)
	}
	return c.Context.Done()
}

func TestSlow(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx := &watchedCtx{Context: parent, asked: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			_, err := New().Call(ctx, entry, "", &baton.ProviderRequest{Messages: []baton.Message{user(`"/slow"`)}})
			done <- err
		}()
		<-ctx.asked
		select {
		case err := <-done:
			t.Fatalf("/slow returned before its context ended: %v", err)
		default:
		}
		cancel()
		var pe *baton.ProviderError
		if err := <-done; !errors.As(err, &pe) {
			t.Fatalf("err = %v, want a ProviderError", err)
		}
		if diff := cmp.Diff(baton.ProviderError{Detail: "context canceled"}, *pe); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_, err := New().Call(ctx, entry, "", &baton.ProviderRequest{Messages: []baton.Message{user(`"/slow"`)}})
		var pe *baton.ProviderError
		if !errors.As(err, &pe) || pe.Detail != "context deadline exceeded" || !pe.Retryable {
			t.Errorf("err = %#v, want a retryable deadline failure", err)
		}
	})
}

func TestCancelledBeforeCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New().Call(ctx, entry, "", &baton.ProviderRequest{Messages: []baton.Message{user(`"hi"`)}})
	var pe *baton.ProviderError
	if !errors.As(err, &pe) || pe.Retryable || pe.Detail != "context canceled" {
		t.Errorf("err = %#v, want a non-retryable cancellation", err)
	}
}

func BenchmarkCall(b *testing.B) {
	req := &baton.ProviderRequest{
		System: "Be brief.",
		Messages: []baton.Message{
			user(`"call roll_dice {\"sides\": 6}"`),
			assistant(`[{"type":"tool_use","id":"t1","name":"roll_dice","input":{"sides":6}}]`),
			user(`[{"type":"tool_result","tool_use_id":"t1","content":"4"}]`),
			assistant(`[{"type":"text","text":"roll_dice returned: 4"}]`),
			user(`"thanks, what did you roll?"`),
		},
		Tools:   tools("roll_dice", "get_time"),
		OnDelta: func(string) {},
	}
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Call(context.Background(), entry, "", req); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzEncodeBlocks: the reply's content is what encoding/json writes for
// its blocks.
func FuzzEncodeBlocks(f *testing.F) {
	f.Add("hi <there> & \u2028 \x00 \xff", "get_time")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, text, name string) {
		for _, blocks := range [][]any{
			{baton.TextBlock{Type: "text", Text: text}},
			{baton.TextBlock{Type: "text", Text: text}, toolUse{Type: "tool_use", ID: "toolu_1", Name: name, Input: json.RawMessage(`{}`)}, baton.TextBlock{Type: "text", Text: name}},
			nil,
		} {
			got, err := encodeBlocks(blocks)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := encode(blocks)
			if string(got) != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		}
	})
}
