// Package mcptest is a small MCP server for tests, built with the official
// Go SDK: tools echo (returns input.text), fail (an isError result), slow
// (blocks until cancelled) and pid (the server's process id).
package mcptest

import (
	"context"
	"fmt"
	"os"
	"strconv"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvServe, set to "1", tells a test binary's TestMain to call ServeStdio
// instead of running tests. EnvMark names a file that slow appends
// "cancelled\n" to when its call is cancelled.
const (
	EnvServe = "BATON_MCP_TEST_SERVE"
	EnvMark  = "BATON_MCP_TEST_MARK"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type none struct{}

// Hooks observe slow calls; nil funcs are skipped.
type Hooks struct {
	Started   func() // a slow call began
	Cancelled func() // a slow call's context ended
}

// NewServer returns the test server.
func NewServer(h Hooks) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "baton-test", Version: "1"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			r := text("it failed")
			r.IsError = true
			return r, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Blocks until cancelled."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			if h.Started != nil {
				h.Started()
			}
			<-ctx.Done()
			if h.Cancelled != nil {
				h.Cancelled()
			}
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(s, &sdk.Tool{Name: "pid", Description: "The server's process id."},
		func(_ context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	return s
}

// ServeStdio serves the test server on stdin/stdout until stdin closes.
func ServeStdio() {
	mark := os.Getenv(EnvMark)
	s := NewServer(Hooks{Cancelled: func() {
		if mark == "" {
			return
		}
		if f, err := os.OpenFile(mark, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			_, _ = f.WriteString("cancelled\n")
			_ = f.Close()
		}
	}})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
