// sdk.mjs drives BAE's own TypeScript SDK (@prettysmartdev/bae-ts, built
// from a checkout of prettysmartdev/better-agent-engine) against a Baton
// server through the SDK's public API only. TestBAETypeScriptSDK in
// ../../compat_test.go runs it; it is our code, the SDK is not.
//
// Every check runs even when an earlier one fails, so one run lists every
// incompatibility. Each prints one line:
//
//   ok <name>
//   FAIL <name>: <reason>
//
// and the script ends with "done <passed>/<total>", exiting 1 on any FAIL.
//
// Environment:
//   BAE_SDK             path of the built SDK entry point (dist/index.js)
//   BAE_SERVER_URL      client-port base URL
//   BAE_CLIENT_KEY      client key of the main profile (allows get_time, add,
//                       run_shell_command)
//   BAE_CLIENT_KEY_2    a second client key of the same profile (join)
//   BAE_OTHER_KEY       a client key of a different profile (profile_mismatch)
//   BAE_PROFILE_NAME    the main profile's name
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`sdk.mjs: ${name} is not set`);
    process.exit(2);
  }
  return v;
};

const sdk = await import(pathToFileURL(env("BAE_SDK")).href);
const { Config, Harness, Session, FetchTransport, messageText, ApiError, RpcError, ProvidersFailedError, ToolError } = sdk;
const { runShellCommand, SandboxTarget, RemoteMode, launchSubagent, SubagentLaunch } = sdk;
const serverUrl = env("BAE_SERVER_URL");
const key1 = env("BAE_CLIENT_KEY");
const key2 = env("BAE_CLIENT_KEY_2");
const otherKey = env("BAE_OTHER_KEY");
const profileName = env("BAE_PROFILE_NAME");

const CHECK_TIMEOUT_MS = 20000;
const results = [];

// check runs fn as one named check with a timeout; a hang is a failure.
async function check(name, fn) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([fn(), timeout]);
    console.log(`ok ${name}`);
    results.push(true);
  } catch (err) {
    const msg = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    console.log(`FAIL ${name}: ${msg.replace(/\n\s*\n/g, "\n").trim().replace(/\n/g, "\n    ")}`);
    results.push(false);
  } finally {
    clearTimeout(timer);
  }
}

// rejects awaits p and returns the error it rejects with, which must be an
// instance of cls.
async function rejects(p, cls) {
  try {
    const v = await p;
    throw new assert.AssertionError({ message: `expected ${cls.name}, resolved with ${JSON.stringify(v)}` });
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    if (!(err instanceof cls)) {
      throw new assert.AssertionError({ message: `expected ${cls.name}, got ${err?.name}: ${err?.message}` });
    }
    return err;
  }
}

async function rpcRejects(p, code, messagePart) {
  const err = await rejects(p, RpcError);
  assert.equal(err.code, code, `RpcError code (message ${JSON.stringify(err.rpcMessage)})`);
  if (messagePart !== undefined) assert.ok(err.rpcMessage.includes(messagePart), `RpcError message ${JSON.stringify(err.rpcMessage)} lacks ${JSON.stringify(messagePart)}`);
  return err;
}

async function apiRejects(p, status, type) {
  const err = await rejects(p, ApiError);
  assert.deepEqual({ status: err.status, type: err.type }, { status, type }, `ApiError: ${err.message}`);
  return err;
}

// recorder is a Harness set up with the get_time and add tools and every
// hook, logging what the SDK did.
function recorder(key, label) {
  const rec = {
    token: `${label}-${randomBytes(4).toString("hex")}`,
    toolCalls: [],
    hooks: [],
    events: [],
    messages: [],
    reset() {
      this.toolCalls = [];
      this.hooks = [];
      this.events = [];
      this.messages = [];
    },
  };
  rec.harness = new Harness(new Config({ serverUrl, clientKey: key, clientVersion: `baton-compat/${label}` }));
  rec.harness.registerTool({
    name: "get_time",
    description: "Return a fixed token.",
    input_schema: { type: "object", properties: { zone: { type: "string" } } },
    handler: (input) => {
      rec.toolCalls.push({ name: "get_time", input });
      if (rec.failNext) {
        rec.failNext = false;
        throw new Error("boom");
      }
      return rec.token;
    },
  });
  rec.harness.registerTool({
    name: "add",
    description: "Add two numbers.",
    input_schema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
    handler: async (input) => {
      rec.toolCalls.push({ name: "add", input });
      return String(input.a + input.b);
    },
  });
  rec.harness.setHooks({
    before_send: (m) => {
      rec.hooks.push("before_send");
      rec.messages.push(structuredClone(m));
    },
    after_receive: (m) => {
      rec.hooks.push("after_receive");
      rec.messages.push(structuredClone(m));
    },
    before_tool_call: (tu) => {
      rec.hooks.push("before_tool_call");
      rec.lastToolUse = tu;
    },
    after_tool_call: () => rec.hooks.push("after_tool_call"),
    on_event: (e) => {
      rec.hooks.push("on_event");
      rec.events.push(e);
    },
  });
  return rec;
}

const withoutEvents = (hooks) => hooks.filter((h) => h !== "on_event");
const types = (events) => events.map((e) => e.event_type);

const r1 = recorder(key1, "one");
let s1;
let lastEventId;

await check("connect returns a session and the sanitized profile", async () => {
  s1 = await r1.harness.connect();
  assert.match(s1.id, /^ses_[0-9a-f]{32}$/);
  assert.equal(s1.profile.name, profileName);
  assert.match(s1.profile.id, /^pro_[0-9a-f]{32}$/);
  assert.deepEqual([...s1.profile.allowed_tools].sort(), ["add", "get_time", "run_shell_command"]);
  assert.deepEqual(s1.profile.mcp_servers, []);
  assert.equal(s1.profile.provider.provider, "scripted");
  assert.equal(typeof s1.profile.provider.model, "string");
  assert.ok(!("auth_token" in s1.profile) && !("primary_provider" in s1.profile), `profile leaks fields: ${JSON.stringify(s1.profile)}`);
});
if (!s1) {
  console.log("done 0/1 (connect failed; nothing else can run)");
  process.exit(1);
}

await check("send drives a client tool call to the final reply", async () => {
  r1.reset();
  const reply = await s1.send("call get_time");
  assert.equal(reply.role, "assistant");
  assert.equal(messageText(reply), `get_time returned: ${r1.token}`);
  assert.deepEqual(r1.toolCalls, [{ name: "get_time", input: {} }]);
  assert.deepEqual(withoutEvents(r1.hooks), ["before_send", "after_receive", "before_tool_call", "after_tool_call", "before_send", "after_receive"]);
  assert.equal(r1.lastToolUse.dispatch, "client", "tool_use.dispatch");
  assert.match(r1.lastToolUse.id, /^toolu_/);
  // The paused assistant turn carries dispatch tags; the SDK strips them
  // when echoing, and the final message has none.
  const paused = r1.messages[1];
  assert.equal(paused.content.find((b) => b.type === "tool_use")?.dispatch, "client");
  const results = r1.messages[2].content;
  assert.deepEqual(results, [{ type: "tool_result", tool_use_id: r1.lastToolUse.id, content: r1.token }]);
  assert.ok(Array.isArray(reply.content) && reply.content.every((b) => !("dispatch" in b)), JSON.stringify(reply.content));
});

await check("send delivers live session.event notifications to on_event", async () => {
  // r1.events still holds the previous turn's notifications.
  const ts = types(r1.events);
  for (const want of ["provider.request", "provider.response", "tool.call", "server.message.send"]) {
    assert.ok(ts.includes(want), `on_event lacks ${want}: ${ts.join(",")}`);
  }
  const call = r1.events.find((e) => e.event_type === "tool.call");
  assert.equal(call.payload.name, "get_time");
  assert.equal(call.payload.dispatch, "client");
  for (const e of r1.events) {
    assert.match(e.id, /^evt_[0-9a-f]{32}$/);
    assert.equal(e.session_id, s1.id);
    assert.match(e.client_key_id ?? "", /^key_[0-9a-f]{32}$/);
    assert.match(e.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  }
  lastEventId = r1.events.at(-1).id;
});

await check("the sender's own client events are not echoed to on_event", async () => {
  const ts = types(r1.events);
  assert.ok(!ts.includes("client.message.send"), `on_event got client.message.send: ${ts.join(",")}`);
  const clientResults = r1.events.filter((e) => e.event_type === "tool.result" && e.payload.dispatch === "client");
  assert.deepEqual(clientResults, []);
});

await check("a plain message is echoed", async () => {
  r1.reset();
  const reply = await s1.send("hello");
  assert.equal(messageText(reply), "You said: hello");
  assert.deepEqual(r1.toolCalls, []);
  assert.deepEqual(withoutEvents(r1.hooks), ["before_send", "after_receive"]);
  lastEventId = r1.events.at(-1)?.id ?? lastEventId;
});

await check("tool input reaches the handler", async () => {
  r1.reset();
  const reply = await s1.send('call get_time {"zone":"UTC"}');
  assert.deepEqual(r1.toolCalls, [{ name: "get_time", input: { zone: "UTC" } }]);
  assert.equal(messageText(reply), `get_time returned: ${r1.token}`);
});

await check("parallel tool calls in one turn", async () => {
  r1.reset();
  const reply = await s1.send('call get_time\ncall add {"a":2,"b":3}');
  assert.deepEqual(r1.toolCalls.map((c) => c.name), ["get_time", "add"]);
  assert.equal(messageText(reply), `get_time returned: ${r1.token}\nadd returned: 5`);
  lastEventId = r1.events.at(-1)?.id ?? lastEventId;
});

await check("subscribe replays from the start for an unknown since_event_id", async () => {
  const seen = [];
  await s1.subscribe(
    (e) => {
      seen.push(e);
      // The last turn's final message ends the replay we know about.
      return !(e.event_type === "server.message.send" && e.id === lastEventId);
    },
    { sinceEventId: "evt_00000000000000000000000000000000" },
  );
  const ts = types(seen);
  assert.deepEqual(ts.slice(0, 2), ["session.open", "session.driver.register"]);
  assert.ok(ts.includes("client.message.send"), `replay lacks client.message.send: ${ts.join(",")}`);
  assert.equal(new Set(seen.map((e) => e.id)).size, seen.length, "duplicate event ids in replay");
  assert.deepEqual(seen.at(-1).payload.content, [{ type: "text", text: `get_time returned: ${r1.token}\nadd returned: 5` }]);
});

await check("subscribe streams live events after since_event_id", async () => {
  const seen = [];
  const sub = s1.subscribe(
    (e) => {
      seen.push(e);
      return !(e.event_type === "server.message.send" && messageText(e.payload) === "You said: live ping");
    },
    { sinceEventId: lastEventId },
  );
  r1.reset();
  const reply = await s1.send("live ping");
  assert.equal(messageText(reply), "You said: live ping");
  await sub;
  assert.ok(!seen.some((e) => e.id === lastEventId), "since_event_id itself was replayed");
  const ts = types(seen);
  assert.equal(ts[0], "client.message.send", `first live event: ${ts.join(",")}`);
  assert.deepEqual(seen[0].payload, { role: "user", content: "live ping" });
  lastEventId = seen.at(-1).id;
});

await check("unsubscribe ends a running subscribe stream", async () => {
  let unsub;
  let n = 0;
  await s1.subscribe(
    () => {
      // The first replayed event proves the stream is registered.
      if (n++ === 0) unsub = s1.unsubscribe();
    },
    { sinceEventId: "evt_00000000000000000000000000000000" },
  );
  assert.ok(n > 0);
  await unsub;
});

await check("content blocks and non-ASCII text round-trip", async () => {
  const text = "héllo ✓ 👋 \"quoted\" \\ <tag> & \u2028 done";
  assert.equal(messageText(await s1.send({ role: "user", content: [{ type: "text", text }] })), `You said: ${text}`);
});

await check("a failed tool handler leaves a turn the next send abandons", async () => {
  r1.reset();
  r1.failNext = true;
  await rejects(s1.send("call get_time"), ToolError);
  // The turn is parked on the server; a plain message from its owner
  // abandons the pending call with a synthetic error result.
  const reply = await s1.send("carry on");
  assert.equal(messageText(reply), "get_time failed: Client tool call was abandoned before returning a result.");
  assert.deepEqual(r1.toolCalls.map((c) => c.name), ["get_time"]);
});

await check("rpc with a bad session key is an ApiError", async () => {
  const bad = new Session(new FetchTransport(serverUrl), s1.id, `bae_ses_${"0".repeat(48)}`, s1.profile, new Map(), {});
  await apiRejects(bad.send("hello"), 401, "unauthorized");
});

// replay collects a session's whole event log through subscribe, up to the
// first event for which last returns true.
async function replay(session, last) {
  const seen = [];
  await session.subscribe(
    (e) => {
      seen.push(e);
      return !last(e);
    },
    { sinceEventId: "evt_00000000000000000000000000000000" },
  );
  return seen;
}

await check("builtin run_shell_command on the host runs and reports its lifecycle", async () => {
  const h = new Harness(new Config({ serverUrl, clientKey: key1 }));
  h.registerSandboxTool(runShellCommand(h.sandboxSession(), SandboxTarget.none(), RemoteMode.auto()));
  const s = await h.connect();
  try {
    const reply = messageText(await s.send('call run_shell_command {"command":"echo baton-shell"}'));
    assert.ok(reply.startsWith("run_shell_command returned: ") && reply.includes("baton-shell"), reply);
    const events = await replay(s, (e) => e.event_type === "server.message.send" && messageText(e.payload) === reply);
    const lifecycle = events.filter((e) => e.event_type.startsWith("session.sandbox.")).map((e) => [e.event_type, e.payload]);
    const local = { dispatch: "local", image: null, unsandboxed: true, container_id: null, detail: null };
    assert.deepEqual(lifecycle, [["session.sandbox.running", local], ["session.sandbox.stopped", local]]);
  } finally {
    await s.close();
  }
});

await check("remote Auto-mode sandbox tool is dispatched by the server", async () => {
  const h = new Harness(new Config({ serverUrl, clientKey: key1 }));
  h.registerSandboxTool(runShellCommand(h.sandboxSession(), SandboxTarget.remote(), RemoteMode.auto()));
  const seen = [];
  h.setHooks({ on_event: (e) => seen.push(e) });
  const s = await h.connect();
  try {
    const reply = messageText(await s.send('call run_shell_command {"command":"echo hi"}'));
    assert.equal(
      reply,
      "run_shell_command failed: sandbox error: no remote sandbox is running for tool 'run_shell_command'; call session.startRemoteSandbox first",
    );
    const call = seen.find((e) => e.event_type === "tool.call");
    assert.equal(call?.payload.dispatch, "sandbox", `tool.call: ${JSON.stringify(call?.payload)}`);
    const ts = types(seen);
    assert.ok(ts.includes("sandbox.request") && ts.includes("sandbox.response"), ts.join(","));
  } finally {
    await s.close();
  }
});

await check("remote subagent declaration is dispatched by the server", async () => {
  const h = new Harness(new Config({ serverUrl, clientKey: key1 }));
  h.registerSubagentTool(launchSubagent(h.subagentSession(), [{ harness: "echo", commandTemplate: "cat" }], SubagentLaunch.remote("alpine:3.19")));
  const seen = [];
  h.setHooks({ on_event: (e) => seen.push(e) });
  const s = await h.connect();
  try {
    const reply = messageText(await s.send('call launch_subagent {"harness":"echo","model":"m","prompt":"hi"}'));
    assert.equal(
      reply,
      `launch_subagent failed: {"error":"no remote sandbox is running for tool 'launch_subagent'; call session.startRemoteSandbox first"}`,
    );
    const call = seen.find((e) => e.event_type === "tool.call");
    assert.equal(call?.payload.dispatch, "subagent", `tool.call: ${JSON.stringify(call?.payload)}`);
  } finally {
    await s.close();
  }
});

await check("updateClientTools accepts an allowed tool", async () => {
  await s1.updateClientTools([{ name: "get_time", description: "Return a fixed token.", input_schema: { type: "object" } }]);
});

await check("updateClientTools rejects a tool outside allowed_tools", async () => {
  await rpcRejects(s1.updateClientTools([{ name: "not_allowed" }]), -32015, "tool_not_allowed");
});

await check("reportLocalSandbox records an unsandboxed run", async () => {
  await s1.reportLocalSandbox("running", null, null, "baton compat");
});

await check("reportLocalSubagent records a start", async () => {
  await s1.reportLocalSubagent({ state: "start", subagent_id: "sba_compat", harness: "compat", model: "none", detail: null });
});

await check("startRemoteSandbox rejects an image outside available_sandboxes", async () => {
  await rpcRejects(s1.startRemoteSandbox("alpine:3.19"), -32011, "sandbox_image_not_allowed");
});

await check("stopRemoteSandbox without a sandbox", async () => {
  await rpcRejects(s1.stopRemoteSandbox(), -32013, "sandbox_not_running");
});

await check("execRemoteSandbox without a sandbox", async () => {
  await rpcRejects(s1.execRemoteSandbox("true"), -32013, "sandbox_not_running");
});

await check("cancelRemoteSubagent for an unknown id", async () => {
  await rpcRejects(s1.cancelRemoteSubagent("sba_nope"), -32014, "subagent_not_found");
});

const r2 = recorder(key2, "two");
await check("join attaches a second driver that runs its own tools", async () => {
  const s2 = await r2.harness.join(s1.id);
  assert.equal(s2.id, s1.id);
  assert.equal(s2.profile.name, profileName);
  assert.equal(messageText(await s2.send("hello from two")), "You said: hello from two");
  r1.reset();
  assert.equal(messageText(await s2.send("call get_time")), `get_time returned: ${r2.token}`);
  assert.deepEqual(r2.toolCalls.map((c) => c.name), ["get_time"]);
  assert.deepEqual(r1.toolCalls, []);
});

await check("join with another profile's key is profile_mismatch", async () => {
  await apiRejects(recorder(otherKey, "other").harness.join(s1.id), 403, "profile_mismatch");
});

await check("join of an unknown session is not_found", async () => {
  await apiRejects(recorder(key1, "x").harness.join("ses_00000000000000000000000000000000"), 404, "not_found");
});

await check("connect with a bad key is unauthorized", async () => {
  await apiRejects(recorder(`bae_${"0".repeat(48)}`, "bad").harness.connect(), 401, "unauthorized");
});

await check("connect declaring a tool outside allowed_tools is tool_not_allowed", async () => {
  const h = new Harness(new Config({ serverUrl, clientKey: key1 }));
  h.registerTool({ name: "not_allowed", description: "", input_schema: { type: "object" }, handler: () => "" });
  await apiRejects(h.connect(), 403, "tool_not_allowed");
});

await check("a failing provider surfaces as ProvidersFailedError", async () => {
  const s3 = await r1.harness.connect();
  const err = await rejects(s3.send("/fail"), ProvidersFailedError);
  assert.equal(messageText(err.assistantMessage), "The provider is currently unavailable.");
  const failed = err.events.find((e) => e.event_type === "session.error" && e.payload.reason === "all_providers_failed");
  assert.ok(failed, `events: ${types(err.events).join(",")}`);
  assert.equal(failed.payload.attempts, 1);
  await rpcRejects(s3.send("hello"), -32000, "session is error, not open");
  await apiRejects(s3.close(), 409, "session_closed");
});

await check("close ends the session", async () => {
  await s1.close();
  await apiRejects(s1.close(), 409, "session_closed");
  await rpcRejects(s1.send("hello"), -32001, "registerDriver");
  await apiRejects(r2.harness.join(s1.id), 409, "session_closed");
});

// BAE keeps such a stream open forever; Baton's documented extension ends
// it with a terminal result, which the SDK must take as the end.
await check("subscribe on a closed session replays and then ends (Baton extension)", async () => {
  const seen = [];
  await s1.subscribe((e) => void seen.push(e), { sinceEventId: "evt_00000000000000000000000000000000" });
  assert.equal(seen[0]?.event_type, "session.open");
  assert.equal(seen.at(-1)?.event_type, "session.close");
});

const passed = results.filter(Boolean).length;
console.log(`done ${passed}/${results.length}`);
// Dropped subscribe streams may hold sockets open; exit explicitly.
process.exit(passed === results.length ? 0 : 1);
