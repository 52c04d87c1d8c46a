// Command harness is a minimal agent harness on the Go SDK: it opens a
// session, declares two tools (get_time and roll_dice), sends one message
// and prints the events and the reply (default: "call get_time").
//
//	go run ./examples/harness 'call roll_dice {"sides":20}'
//
// That is how `baton dev`'s offline scripted model is asked for a tool; a
// real model takes plain language ("roll a d20").
//
// BAE_SERVER_URL (default http://127.0.0.1:8080) names the client port;
// BAE_CLIENT_KEY the client key, else the content of
// ./baton-data/client-key (written by `baton dev`).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/baton-engine/baton/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	url := os.Getenv("BAE_SERVER_URL")
	if url == "" {
		url = "http://127.0.0.1:8080"
	}
	key := os.Getenv("BAE_CLIENT_KEY")
	if key == "" {
		b, err := os.ReadFile("baton-data/client-key")
		if err != nil {
			return fmt.Errorf("no BAE_CLIENT_KEY and no ./baton-data/client-key: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	text := "call get_time"
	if len(os.Args) > 1 {
		text = strings.Join(os.Args[1:], " ")
	}

	h := client.NewHarness(client.Config{BaseURL: url, ClientKey: key, ClientVersion: "examples/harness"})
	h.RegisterTool(client.ToolDef{
		Name:        "get_time",
		Description: "Return the current UTC time in RFC 3339 format.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	}, func(context.Context, json.RawMessage) (any, error) {
		return time.Now().UTC().Format(time.RFC3339), nil
	})
	h.RegisterTool(client.ToolDef{
		Name:        "roll_dice",
		Description: "Roll one die and return the value.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"sides":{"type":"integer","minimum":1,"description":"number of sides, default 6"}}}`),
	}, func(_ context.Context, input json.RawMessage) (any, error) {
		var in struct {
			Sides int `json:"sides"`
		}
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, err
		}
		if in.Sides == 0 {
			in.Sides = 6
		}
		if in.Sides < 1 {
			return nil, errors.New("sides must be at least 1")
		}
		return map[string]int{"sides": in.Sides, "value": 1 + rand.IntN(in.Sides)}, nil
	})
	h.OnEvent(func(ev client.Event) {
		fmt.Printf("event  %s %s\n", ev.Type, ev.Payload)
	})
	h.OnToolCall(func(c client.ToolCall) {
		fmt.Printf("tool   %s(%s)\n", c.Name, c.Input)
	})
	h.OnToolResult(func(c client.ToolCall, r client.ToolResult) {
		fmt.Printf("result %s -> %s (error=%v)\n", c.Name, r.Text(), r.IsError)
	})

	s, err := h.Connect(ctx)
	if err != nil {
		return err
	}
	defer s.Close(context.WithoutCancel(ctx))
	fmt.Printf("session %s (profile %s, %s %s)\n", s.ID, s.Profile.Name, s.Profile.Provider.Provider, s.Profile.Provider.Model)

	reply, err := s.Send(ctx, text)
	if err != nil {
		return err
	}
	fmt.Printf("reply  %s\n", reply.Message.Text())
	return nil
}
