package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/baton-engine/baton/client/executor"
)

// A tool executor in an environment: one tool, served until interrupted.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	e, err := executor.New(executor.Config{
		BaseURL:    "https://baton.example",
		Credential: os.Getenv("BATON_EXECUTOR_CREDENTIAL"), // bae_exc_…
		Scope:      executor.Environment("env_0123"),
		Tools: []executor.Tool{{
			Def: executor.ToolDef{
				Name:        "upper",
				Description: "Upper-case a text",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			},
			Handle: func(ctx context.Context, c executor.Call) (executor.Result, error) {
				var in struct{ Text string }
				if err := json.Unmarshal(c.Input, &in); err != nil {
					return executor.ErrorResult("input: " + err.Error()), nil
				}
				_ = c.Progress("working", 1, 1)
				return executor.TextResult(strings.ToUpper(in.Text)), nil
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Open(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-e.Done():
		log.Printf("stopped by the harness: %v", e.Err())
	}
	if err := e.Close(context.WithoutCancel(ctx)); err != nil {
		log.Print(err)
	}
}

// A machine offering a remote shell: process.exec runs in /srv/work.
func Example_shell() {
	e, err := executor.New(executor.Config{
		BaseURL:      "https://baton.example",
		Credential:   os.Getenv("BATON_EXECUTOR_CREDENTIAL"),
		Scope:        executor.Machine("mch_0123"),
		Capabilities: executor.Capabilities{Process: &executor.ProcessCapability{MaxSessions: 4}},
		Process:      &executor.Shell{Dir: "/srv/work"},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Open(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)
	<-e.Done()
}

// echoBrain is a minimal Agent: it answers each turn with its input and
// then with every input added while it runs, until cancelled.
type echoBrain struct{}

func (echoBrain) Open(_ context.Context, sessionID, ref string) (string, error) {
	if ref != "" {
		return ref, nil // resume the local conversation
	}
	return "conv-" + sessionID, nil
}

func (echoBrain) Run(ctx context.Context, t *executor.Turn) error {
	if _, err := t.Emit(executor.MessageEvent(t.Input)); err != nil {
		return err
	}
	for {
		select {
		case <-t.InputReady():
			for _, in := range t.Inputs() {
				if _, err := t.Emit(executor.MessageEvent(in.Content)); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (echoBrain) Close(context.Context, string) error { return nil }

// A machine offering a brain.
func Example_agent() {
	e, err := executor.New(executor.Config{
		BaseURL:      "https://baton.example",
		Credential:   os.Getenv("BATON_EXECUTOR_CREDENTIAL"),
		Scope:        executor.Machine("mch_0123"),
		Capabilities: executor.Capabilities{Agent: &executor.AgentCapability{MaxSessions: 2}},
		Agent:        echoBrain{},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Open(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)
	<-e.Done()
}

// A permission prompt from inside a turn.
func ExampleTurn_RequestInteraction() {
	ask := func(ctx context.Context, t *executor.Turn, toolUseID string) (bool, error) {
		a, err := t.RequestInteraction(ctx, executor.Interaction{
			Kind:      executor.KindPermission,
			ToolUseID: toolUseID,
			Prompt:    "Run `make clean`?",
		})
		if err != nil {
			return false, err
		}
		return a.Status == "resolved" && a.Decision == executor.PermissionAllow, nil
	}
	fmt.Println(ask != nil)
}
