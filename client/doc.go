// Package client is the Go SDK for Baton and BAE servers: it opens sessions
// on the client port, drives the harness tool-call loop over JSON-RPC 2.0
// on NDJSON, and follows a session's live event stream.
//
// The package depends only on the standard library, so it can live in its
// own module.
//
// A Harness holds a Config, the client-side tools and the hooks. Connect
// opens a session (POST /api/v1/sessions, then session.registerDriver);
// Join attaches to an existing one. Session.Send sends one user turn and
// runs the tool loop: whenever the assistant pauses on tool_use blocks that
// belong to this client, their handlers run concurrently and the results go
// back as one user message, until a reply without client tool calls
// arrives. Events reach the OnEvent hook live, as the server streams them.
// A server forgets its drivers when it restarts; a Session refused with
// -32001 registers again and resends the same request once, so tool
// results still reach a turn that paused before the restart. Cancelling
// a Send's context does not stop the server's turn: Session.CancelTurn
// does.
//
//	h := client.NewHarness(client.Config{
//		BaseURL:   "http://127.0.0.1:8080",
//		ClientKey: key,
//	})
//	h.RegisterTool(client.ToolDef{
//		Name:        "get_time",
//		Description: "Return the current UTC time",
//	}, func(ctx context.Context, _ json.RawMessage) (any, error) {
//		return time.Now().UTC().Format(time.RFC3339), nil
//	})
//	h.OnEvent(func(ev client.Event) { fmt.Println(ev.Type) })
//	s, err := h.Connect(ctx)
//	if err != nil {
//		return err
//	}
//	defer s.Close(context.WithoutCancel(ctx))
//	reply, err := s.Send(ctx, "What time is it?")
//	if err != nil {
//		return err
//	}
//	fmt.Println(reply.Message.Text())
//
// # Builtin tools
//
// The package ships the tools of BAE's SDKs. FileTools returns read_file,
// write_file and explore_files confined by a FileToolsConfig (allowed
// directories, extension and file-name rules); every path is resolved
// through the file system, symlinks and ".." included, before it is
// checked, and refusals are in-band {"error": …} results.
// Harness.AddShellTool adds run_shell_command, or a named tool built from
// a command template, running on this machine (TargetNone), in a local
// container (TargetLocal) or in the session's remote sandbox
// (TargetRemote, run by the server in RemoteAuto mode or by the client
// through Session.ExecRemoteSandbox in RemoteManual mode); local commands
// run in their own process group, killed on timeout or cancel, with each
// output stream capped at OutputCap. Harness.AddSubagentTool adds
// launch_subagent, which starts CLI agents in the background (at most
// MaxLocalSubagents per session) and declares local_subagent_status while
// any is tracked; the lifecycle reaches the server through
// session.reportLocalSandbox and session.reportLocalSubagent. Sandbox and
// subagent handlers find their session with SessionFrom; Session.Close
// cancels the session's subagents and stops its local containers.
//
// A Session also reads and writes the session's file area (WriteFile,
// ReadFile, OpenFile, DeleteFile, ListFiles) and downloads artifacts
// executors uploaded (Artifact).
//
// Errors are typed: *APIError for RFC 7807 REST failures, *RPCError for
// JSON-RPC error frames, *ProvidersFailedError when every provider of a
// turn failed, *TransportError for network failures and malformed or
// truncated streams, and ErrLagged (via *LaggedError) when a subscription
// fell behind the server. A cancelled context surfaces as the context's
// error.
package client
