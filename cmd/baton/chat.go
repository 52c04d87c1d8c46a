package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client"
)

func (c *cli) chatCmd() *cobra.Command {
	var url, key, join string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat with a session from the terminal, with two local demo tools",
		Long: `chat opens a session (or joins one with --session) through the Go SDK and
reads messages from the terminal. It declares two local tools the model can
call — get_time and roll_dice — and shows every event as it streams.

With "go run ./cmd/baton dev" running, try:  call get_time
The URL defaults to BAE_SERVER_URL or http://127.0.0.1:8080, the key to
BAE_CLIENT_KEY or ./baton-data/client-key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				url = c.getenv("BAE_SERVER_URL")
			}
			if url == "" {
				url = "http://127.0.0.1:8080"
			}
			if key == "" {
				key = c.getenv("BAE_CLIENT_KEY")
			}
			if key == "" {
				b, err := os.ReadFile(filepath.Join(devDataDir, "client-key"))
				if err != nil {
					return usageErr(errors.New("no client key: pass --key, set BAE_CLIENT_KEY, or run `baton dev` in this directory first"))
				}
				key = strings.TrimSpace(string(b))
			}
			return c.chat(cmd.Context(), url, key, join, quiet)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "client API URL")
	cmd.Flags().StringVar(&key, "key", "", "client key")
	cmd.Flags().StringVar(&join, "session", "", "join this session instead of opening one")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "show only replies and tool calls, not every event")
	return cmd
}

// demoTools are the tools `baton chat` runs locally.
func demoTools(h *client.Harness) {
	h.RegisterTool(client.ToolDef{
		Name:        "get_time",
		Description: "Returns the current local time of the user's machine.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	}, func(context.Context, json.RawMessage) (any, error) {
		return time.Now().Format(time.RFC1123), nil
	})
	h.RegisterTool(client.ToolDef{
		Name:        "roll_dice",
		Description: "Rolls a die with the given number of sides (default 6).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"sides":{"type":"integer","minimum":2}}}`),
	}, func(_ context.Context, in json.RawMessage) (any, error) {
		var p struct {
			Sides int `json:"sides"`
		}
		_ = json.Unmarshal(in, &p)
		if p.Sides < 2 {
			p.Sides = 6
		}
		return fmt.Sprintf("%d", 1+rand.IntN(p.Sides)), nil
	})
}

func (c *cli) chat(ctx context.Context, url, key, join string, quiet bool) error {
	out := c.stdout
	h := client.NewHarness(client.Config{BaseURL: url, ClientKey: key, ClientVersion: "baton-chat/" + versionTag()})
	demoTools(h)
	h.OnToolCall(func(tc client.ToolCall) {
		fmt.Fprintf(out, "  → %s %s\n", tc.Name, compact(tc.Input))
	})
	h.OnToolResult(func(tc client.ToolCall, r client.ToolResult) {
		fmt.Fprintf(out, "  ← %s: %s\n", tc.Name, r.Text())
	})
	var sess *client.Session
	var err error
	if join != "" {
		sess, err = h.Join(ctx, join)
	} else {
		sess, err = h.Connect(ctx)
	}
	if err != nil {
		return runtimeErr(fmt.Errorf("connect to %s: %w", url, err))
	}
	fmt.Fprintf(out, "session %s (profile %s, %s %s)\ntype a message, /quit to leave; try: call get_time\n",
		sess.ID, sess.Profile.Name, sess.Profile.Provider.Provider, sess.Profile.Provider.Model)

	in := bufio.NewScanner(c.stdin)
	for {
		fmt.Fprint(out, "> ")
		if !in.Scan() {
			fmt.Fprintln(out)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return nil
		}
		streaming := false
		// A model call's deltas arrive before its provider.request event,
		// which is committed behind the call, and before its
		// provider.response; the first delta after a response starts the
		// text of the next call.
		var streamed strings.Builder // text streamed by the latest model call
		called := true
		reply, err := sess.SendStream(ctx, line, func(ev client.Event) {
			if ev.Type == client.DeltaType {
				if called {
					streamed.Reset()
					called = false
				}
				if !streaming {
					fmt.Fprint(out, "assistant: ")
					streaming = true
				}
				fmt.Fprint(out, ev.Delta)
				streamed.WriteString(ev.Delta)
				return
			}
			if ev.Type == baton.EventProviderResp {
				called = true
			}
			if !quiet {
				if streaming {
					fmt.Fprintln(out)
					streaming = false
				}
				fmt.Fprintf(out, "  · %s\n", ev.Type)
			}
		})
		if streaming {
			fmt.Fprintln(out)
		}
		var pf *client.ProvidersFailedError
		switch {
		case errors.As(err, &pf):
			fmt.Fprintf(out, "! every provider failed: %s\n", pf.Message.Text())
			return runtimeErr(errors.New("the session is in error state; start a new chat"))
		case errors.Is(err, context.Canceled), errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return runtimeErr(err)
		}
		if text := reply.Message.Text(); text != "" && text != streamed.String() { // else shown as it streamed
			fmt.Fprintf(out, "assistant: %s\n", text)
		}
	}
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}

func versionTag() string { return strings.Fields(versionString())[1] }
