package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/baton-engine/baton/client"
)

// File tools give the model read_file, write_file and explore_files inside
// the directories allowed, and refuse everything else in-band.
func ExampleFileTools() {
	dir, err := os.MkdirTemp("", "workspace")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk"), 0o644)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("TOKEN=1"), 0o600)

	tools := client.FileTools(client.FileToolsConfig{
		Dirs:             []string{dir},
		DeniedExtensions: []string{"env"},
		DenyPattern:      regexp.MustCompile(`^id_`),
	})
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	h.RegisterTools(tools...)

	read := tools[0].Handler // read_file
	for _, p := range []string{"notes.txt", ".env", "../etc/passwd"} {
		in, _ := json.Marshal(map[string]string{"path": filepath.Join(dir, p)})
		out, _ := read(context.Background(), in)
		var res struct{ Content, Error string }
		json.Unmarshal([]byte(out.(string)), &res)
		reason, _, _ := strings.Cut(res.Error, "`")
		fmt.Printf("%s: %q %q\n", p, res.Content, reason)
	}
	// Output:
	// notes.txt: "buy milk" ""
	// .env: "" "path not permitted: extension "
	// ../etc/passwd: "" "path not permitted: "
}

// Shell tools run commands on this machine, in a local container or in
// the session's remote sandbox.
func ExampleHarness_AddShellTool() {
	ctx := context.Background()
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	// run_shell_command in a local container, killed after a minute.
	if err := h.AddShellTool(client.ShellConfig{
		Target: client.TargetLocal, Image: "alpine:3", Timeout: time.Minute,
	}); err != nil {
		log.Fatal(err)
	}
	// A named tool the server runs in the remote sandbox (Auto mode).
	if err := h.AddShellTool(client.ShellConfig{
		Name: "grep_repo", Description: "Search the repository",
		Template: "grep -rn {pattern} /repo", Target: client.TargetRemote,
	}); err != nil {
		log.Fatal(err)
	}
	s, err := h.Connect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx) // stops the local container
	if _, err := s.StartRemoteSandbox(ctx, "alpine:3"); err != nil {
		log.Fatal(err)
	}
	reply, err := s.Send(ctx, "Where is main defined?")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply.Message.Text())
}

// launch_subagent hands prompts to CLI agents running in the background;
// the model reads their results with local_subagent_status.
func ExampleHarness_AddSubagentTool() {
	ctx := context.Background()
	h := client.NewHarness(client.Config{BaseURL: "http://127.0.0.1:8080", ClientKey: "bae_…"})
	err := h.AddSubagentTool(client.SubagentConfig{
		Subagents: []client.SubagentDef{
			{Harness: "claude", Command: "claude -p --model {model}"}, // prompt on stdin
			{Harness: "codex", Command: "codex exec -m {model} {prompt}", PromptVia: client.PromptArg, Timeout: 5 * time.Minute},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	s, err := h.Connect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx) // cancels the subagents still running
	if _, err := s.Send(ctx, "Ask claude to review main.go"); err != nil {
		log.Fatal(err)
	}
}
