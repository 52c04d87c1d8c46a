package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"time"

	"github.com/baton-engine/baton/client"
)

// A harness with one tool, driving one turn to its final reply.
func ExampleHarness() {
	ctx := context.Background()
	h := client.NewHarness(client.Config{
		BaseURL:   "http://127.0.0.1:8080",
		ClientKey: "bae_…",
	})
	h.RegisterTool(client.ToolDef{
		Name:        "get_time",
		Description: "Return the current UTC time",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	}, func(ctx context.Context, _ json.RawMessage) (any, error) {
		return time.Now().UTC().Format(time.RFC3339), nil
	})
	h.OnEvent(func(ev client.Event) { fmt.Println("event:", ev.Type) })
	h.OnToolCall(func(c client.ToolCall) { fmt.Println("tool:", c.Name) })

	s, err := h.Connect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	reply, err := s.Send(ctx, "What time is it?")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply.Message.Text())
}

// Tool handlers receive the raw input and return a string, any
// JSON-encodable value, or an error that the model sees as is_error.
func ExampleHarness_RegisterTool() {
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	h.RegisterTool(client.ToolDef{
		Name:        "roll_dice",
		Description: "Roll a die with the given number of sides",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"sides":{"type":"integer"}},"required":["sides"]}`),
	}, func(ctx context.Context, input json.RawMessage) (any, error) {
		var in struct {
			Sides int `json:"sides"`
		}
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, err
		}
		if in.Sides < 1 {
			return nil, errors.New("sides must be positive")
		}
		return map[string]int{"value": 1 + rand.IntN(in.Sides)}, nil
	})
}

// Errors are typed: check for the cases a program handles.
func ExampleSession_Send_errors() {
	ctx := context.Background()
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	s, err := h.Connect(ctx)
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Status == 401 {
		log.Fatal("the client key was rejected")
	}
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.Send(ctx, "hello")
	var failed *client.ProvidersFailedError
	var rpcErr *client.RPCError
	switch {
	case errors.As(err, &failed):
		fmt.Println("no provider answered; the session is now in error")
	case errors.As(err, &rpcErr):
		fmt.Println("server refused:", rpcErr.Code, rpcErr.Message)
	case err != nil:
		log.Fatal(err)
	}
}

// Streaming assistant text as it is generated (a Baton extension).
func ExampleSession_SendStream() {
	ctx := context.Background()
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	s, err := h.Connect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.SendStream(ctx, "Tell me a story", func(ev client.Event) {
		if ev.Type == client.DeltaType {
			fmt.Print(ev.Delta)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
}

// An observer following a session, resubscribing after falling behind.
func ExampleSession_Subscribe() {
	ctx := context.Background()
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	s, err := h.Join(ctx, "ses_…")
	if err != nil {
		log.Fatal(err)
	}
	since := ""
	for {
		sub, err := s.Subscribe(ctx, client.SubscribeOptions{SinceEventID: since})
		if err != nil {
			log.Fatal(err)
		}
		for {
			ev, err := sub.Next(ctx)
			if err == io.EOF {
				sub.Close()
				return // unsubscribed or session closed
			}
			if errors.Is(err, client.ErrLagged) {
				since = sub.LastEventID()
				break // resubscribe from the last event seen
			}
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(ev.ID, ev.Type)
		}
		sub.Close()
	}
}

// Paging through a session's persisted history.
func ExampleSession_Events() {
	ctx := context.Background()
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	s, err := h.Connect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cursor := ""
	for {
		page, err := s.Events(ctx, cursor, 200)
		if err != nil {
			log.Fatal(err)
		}
		for _, ev := range page.Items {
			fmt.Println(ev.CreatedAt.Format(time.RFC3339), ev.Type)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
}
