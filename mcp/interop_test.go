package mcp

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
)

// TestServerEverythingInterop talks to the MCP reference server
// @modelcontextprotocol/server-everything from npm over stdio. It runs
// when npx is on PATH; the first run downloads the package.
func TestServerEverythingInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("interop test downloads an npm package")
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx is not on PATH (install node and npm to run the server-everything interop test)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := openPool(t, Options{LookupEnv: env(t, nil)})
	srv := []baton.MCPServer{{Name: "everything", Transport: baton.MCPStdio, Command: npx,
		Args: []string{"-y", "@modelcontextprotocol/server-everything", "stdio"}}}
	tools, err := p.Tools(ctx, "s1", srv)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) == 0 {
		t.Skip("server-everything did not start (is the npm registry reachable?)")
	}
	var echo *baton.MCPTool
	for i := range tools {
		if tools[i].Name == "echo" {
			echo = &tools[i]
		}
	}
	if echo == nil || echo.Server != "everything" || !strings.Contains(string(echo.InputSchema), "message") {
		t.Fatalf("no echo tool with a message argument among %d tools: %+v", len(tools), echo)
	}
	res, isErr, err := p.Call(ctx, "s1", "everything", "echo", json.RawMessage(`{"message":"hi from baton"}`))
	if err != nil || isErr || !strings.Contains(string(res), "hi from baton") {
		t.Fatalf("echo = %s, isError %v, err %v", res, isErr, err)
	}
	p.CloseSession("s1")
}
