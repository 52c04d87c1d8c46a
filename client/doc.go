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
// Errors are typed: *APIError for RFC 7807 REST failures, *RPCError for
// JSON-RPC error frames, *ProvidersFailedError when every provider of a
// turn failed, *TransportError for network failures and malformed or
// truncated streams, and ErrLagged (via *LaggedError) when a subscription
// fell behind the server. A cancelled context surfaces as the context's
// error.
package client
