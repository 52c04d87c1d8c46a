// Package machine is what `baton executor` serves on the executor SDK
// (client/executor), built from a typed configuration:
//
//   - command-backed tools ([NewTool]): a command or sh -c script per
//     call, the call's input as JSON on stdin and as {param}
//     placeholders, run in a process group of its own that dies with
//     the call;
//   - a shell in sandboxes ([NewSandboxShell]): one process-driver
//     sandbox per session, started by its first command and stopped
//     once idle;
//   - brains: [Brain], Baton's own agent loop, which calls the model
//     gateway of each turn (Anthropic Messages API) until the model
//     answers without tool calls, running the tools on this machine or
//     handing custom tools to the client; and [CommandAgent], which runs
//     a CLI agent once per turn.
//
// The package reads no flags, environment variables or files: the
// caller parses executor.toml into [ToolSpec], [ProcessSpec] and
// [AgentSpec], passes the environment commands get, and wires the
// results into an executor.Config. Nothing here talks to the server
// except through the SDK.
package machine
