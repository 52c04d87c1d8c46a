package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const full = `
# A complete file, entries out of name order.
unknown_top_level = "ignored"

[[mcp.servers]]
name = "web"
transport = "http"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${MCP_TOKEN}", "X-Tenant" = "acme" }

[[mcp.servers]]
name = "filesystem"
transport = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "${DATA_DIR}"]

[[mcp.servers]]
name = "events"
transport = "sse"
url = "http://localhost:9000/sse"

[[providers.entries]]
name = "openai-mini"
provider = "openai"
model = "gpt-4o-mini"
auth_token = "${OPENAI_API_KEY}"
temperature = 0.2 # unknown keys of provider entries are ignored

[[providers.entries]]
name = "anthropic-sonnet"
provider = "anthropic"
base_url = "https://proxy.internal"
model = "claude-sonnet-4-6"
auth_token = "${ANTHROPIC_API_KEY}"
max_tokens = 8096

[[providers.entries]]
name = "offline"
provider = "scripted"

[telemetry]
enabled = true
otlp_endpoint = "http://collector:4317"
otlp_headers = { Authorization = "Bearer ${OTEL_TOKEN}", "x-team" = "core" }
sample_ratio = 0.25
service_name = "baton-prod"

[telemetry.traces]
enabled = false

[telemetry.metrics]
disabled = ["bae.tool.latency", "bae.events.total"]
`

func TestParseFull(t *testing.T) {
	f, err := Parse([]byte(full), env("OTEL_TOKEN", "otel-secret"))
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		MCP: []baton.MCPServer{
			{Name: "events", Transport: "sse", Args: []string{}, URL: "http://localhost:9000/sse", Headers: map[string]string{}},
			{Name: "filesystem", Transport: "stdio", Command: "npx",
				Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "${DATA_DIR}"}, Headers: map[string]string{}},
			{Name: "web", Transport: "http", Args: []string{}, URL: "https://mcp.example.com/mcp",
				Headers: map[string]string{"Authorization": "Bearer ${MCP_TOKEN}", "X-Tenant": "acme"}},
		},
		Providers: []baton.ProviderEntry{
			{Name: "anthropic-sonnet", Provider: "anthropic", BaseURL: "https://proxy.internal", Model: "claude-sonnet-4-6",
				AuthToken: "${ANTHROPIC_API_KEY}", MaxTokens: 8096},
			{Name: "offline", Provider: "scripted", Model: "scripted", MaxTokens: 4096},
			{Name: "openai-mini", Provider: "openai", Model: "gpt-4o-mini", AuthToken: "${OPENAI_API_KEY}", MaxTokens: 4096},
		},
		Telemetry: Telemetry{
			Enabled:      true,
			OTLPEndpoint: ptr("http://collector:4317"),
			// Telemetry headers are resolved at load.
			OTLPHeaders: map[string]string{"Authorization": "Bearer otel-secret", "x-team": "core"},
			SampleRatio: 0.25,
			ServiceName: "baton-prod",
			Traces:      Traces{Enabled: false},
			Metrics:     Metrics{Enabled: true, Disabled: []string{"bae.tool.latency", "bae.events.total"}},
		},
	}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Fatalf("Parse mismatch (-want +got):\n%s", diff)
	}
}

func TestParseEmptyIsDefaults(t *testing.T) {
	for _, doc := range []string{"", "# nothing\n", "[mcp]\n[providers]\n[telemetry]\n", "other = 1\n"} {
		f, err := Parse([]byte(doc), nil)
		if err != nil {
			t.Fatalf("Parse(%q): %v", doc, err)
		}
		if diff := cmp.Diff(empty(), f); diff != "" {
			t.Fatalf("Parse(%q) mismatch (-want +got):\n%s", doc, diff)
		}
	}
	d := empty().Telemetry
	if d.Enabled || d.SampleRatio != 1 || d.ServiceName != "baesrv" || !d.Traces.Enabled || !d.Metrics.Enabled {
		t.Fatalf("telemetry defaults = %+v", d)
	}
}

func TestParseAcceptedEdgeCases(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(t *testing.T, f *File)
	}{
		{"inline array of servers", `mcp.servers = [{name = "a", transport = "stdio", command = "c"}]`, func(t *testing.T, f *File) {
			if len(f.MCP) != 1 || f.MCP[0].Command != "c" {
				t.Fatalf("MCP = %+v", f.MCP)
			}
		}},
		{"command and url kept as written, whatever the transport", "[[mcp.servers]]\nname='a'\ntransport='stdio'\ncommand='c'\nurl='http://x'\n" +
			"[[mcp.servers]]\nname='b'\ntransport='http'\ncommand='c'\nurl='http://x'\n[telemetry]\notlp_endpoint=''\n", func(t *testing.T, f *File) {
			if f.MCP[0].URL != "http://x" || f.MCP[1].Command != "c" || f.MCP[0].Command != "c" || f.MCP[1].URL != "http://x" {
				t.Fatalf("MCP = %+v", f.MCP)
			}
			// The snapshot shows them as configured, as BAE, and an empty
			// OTLP endpoint as "" rather than null.
			b, err := json.Marshal(f.Redacted())
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"command":"c","args":[],"url":"http://x"`, `"otlp_endpoint":""`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("snapshot %s lacks %s", b, want)
				}
			}
		}},
		{"provider and mcp may share a name", "[[mcp.servers]]\nname='x'\ntransport='sse'\nurl='http://h'\n" +
			"[[providers.entries]]\nname='x'\nprovider='scripted'\n", func(t *testing.T, f *File) {
			if len(f.MCP) != 1 || len(f.Providers) != 1 {
				t.Fatalf("got %+v", f)
			}
		}},
		{"max_tokens at u32 max", "[[providers.entries]]\nname='a'\nprovider='openai'\nmodel='m'\nauth_token='t'\nmax_tokens=4294967295\n", func(t *testing.T, f *File) {
			if f.Providers[0].MaxTokens != 4294967295 {
				t.Fatalf("MaxTokens = %d", f.Providers[0].MaxTokens)
			}
		}},
		{"scripted with model and token", "[[providers.entries]]\nname='a'\nprovider='scripted'\nmodel='echo'\nauth_token='t'\n", func(t *testing.T, f *File) {
			if f.Providers[0].Model != "echo" || f.Providers[0].AuthToken != "t" {
				t.Fatalf("entry = %+v", f.Providers[0])
			}
		}},
		{"integer sample ratio", "[telemetry]\nenabled=true\notlp_endpoint='https://c'\nsample_ratio=0\n", func(t *testing.T, f *File) {
			if f.Telemetry.SampleRatio != 0 {
				t.Fatalf("SampleRatio = %v", f.Telemetry.SampleRatio)
			}
		}},
		{"disabled telemetry is not validated and keeps raw headers",
			"[telemetry]\nenabled=false\notlp_endpoint='ftp://x'\nsample_ratio=7.5\notlp_headers={'bad name'='${UNSET}'}\nmetrics.disabled=['nope']\n",
			func(t *testing.T, f *File) {
				want := map[string]string{"bad name": "${UNSET}"}
				if diff := cmp.Diff(want, f.Telemetry.OTLPHeaders); diff != "" || f.Telemetry.SampleRatio != 7.5 {
					t.Fatalf("telemetry = %+v", f.Telemetry)
				}
			}},
		{"every metric name accepted", "[telemetry]\nenabled=true\notlp_endpoint='http://c'\n[telemetry.metrics]\nenabled=false\ndisabled=['" +
			strings.Join(metricNames[:], "','") + "']\n", func(t *testing.T, f *File) {
			if len(f.Telemetry.Metrics.Disabled) != len(metricNames) || f.Telemetry.Metrics.Enabled {
				t.Fatalf("metrics = %+v", f.Telemetry.Metrics)
			}
		}},
		{"header value with tab and multiple vars", "[telemetry]\nenabled=true\notlp_endpoint='http://c'\notlp_headers={a=\"${A}\\t${B}\"}\n", func(t *testing.T, f *File) {
			if got := f.Telemetry.OTLPHeaders["a"]; got != "1\t2" {
				t.Fatalf("header = %q", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc), env("A", "1", "B", "2"))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f)
		})
	}
}

// TestParseErrors has one row per validation rule of BAE's admin API and
// per unknown-key rule, each checked with its position.
func TestParseErrors(t *testing.T) {
	const stdio = "[[mcp.servers]]\nname = 'fs'\ntransport = 'stdio'\ncommand = 'npx'\n"
	const openai = "[[providers.entries]]\nname = 'p'\nprovider = 'openai'\nmodel = 'm'\nauth_token = 't'\n"
	const tel = "[telemetry]\nenabled = true\notlp_endpoint = 'http://c:4317'\n"
	tests := []struct {
		name string
		doc  string
		pos  string // "line:col", "" for no position
		msg  string // substring of the message
	}{
		// TOML itself.
		{"syntax error", "[mcp\n", "1:5", "expected ']'"},
		{"duplicate key", "a = 1\na = 2\n", "2:1", "already defined"},
		{"bad value", "[telemetry]\nenabled = yes\n", "2:11", ""},

		// [mcp] and [[mcp.servers]].
		{"mcp not a table", "mcp = 5\n", "1:1", "mcp: invalid type: integer, expected a table"},
		{"mcp unknown key", "[mcp]\nservers = []\nfoo = 1\n", "3:1", `unknown key "foo" in mcp`},
		{"mcp servers not array", "[mcp]\nservers = 4\n", "2:1", "mcp.servers: invalid type: integer, expected an array of tables"},
		{"mcp server not a table", "[mcp]\nservers = ['x']\n", "2:12", "mcp.servers[0]: invalid type: string, expected a table"},
		{"mcp server unknown field", stdio + "env = { A = 'b' }\n", "5:1", `unknown key "env" in mcp.servers[0]`},
		{"mcp server unknown field in second entry", stdio + "[[mcp.servers]]\nname='b'\ntransport='sse'\nurl='http://h'\ntimeout=3\n", "9:1", `unknown key "timeout" in mcp.servers[1]`},
		{"mcp server unknown subtable", stdio + "[mcp.servers.extra]\na = 1\n", "5:2", `unknown key "extra" in mcp.servers[0]`},
		{"mcp missing name", "[[mcp.servers]]\ntransport = 'stdio'\ncommand = 'x'\n", "1:3", `mcp.servers[0]: missing field "name"`},
		{"mcp blank name", "[[mcp.servers]]\nname = '  '\ntransport = 'stdio'\ncommand = 'x'\n", "2:1", "mcp server name must not be blank"},
		{"mcp name not string", "[[mcp.servers]]\nname = 3\n", "2:1", "mcp.servers[0].name: invalid type: integer, expected a string"},
		{"mcp duplicate name", stdio + stdio, "6:1", `mcp.servers[1].name: duplicate mcp server name "fs" (first defined by mcp.servers[0])`},
		{"mcp missing transport", "[[mcp.servers]]\nname = 'a'\ncommand = 'x'\n", "1:3", `mcp.servers[0]: missing field "transport"`},
		{"mcp unknown transport", "[[mcp.servers]]\nname = 'a'\ntransport = 'websocket'\n", "3:1", `unknown transport "websocket"`},
		{"mcp transport is case sensitive", "[[mcp.servers]]\nname = 'a'\ntransport = 'STDIO'\ncommand = 'x'\n", "3:1", `unknown transport "STDIO"`},
		{"stdio without command", "[[mcp.servers]]\nname = 'a'\ntransport = 'stdio'\n", "1:3", `transport "stdio" requires a non-blank command`},
		{"stdio blank command", "[[mcp.servers]]\nname = 'a'\ntransport = 'stdio'\ncommand = ' '\n", "4:1", `transport "stdio" requires a non-blank command`},
		{"sse without url", "[[mcp.servers]]\nname = 'a'\ntransport = 'sse'\n", "1:3", `transport "sse" requires a non-blank url`},
		{"http blank url", "[[mcp.servers]]\nname = 'a'\ntransport = 'http'\nurl = ''\n", "4:1", `transport "http" requires a non-blank url`},
		{"args not strings", stdio + "args = ['a', 2]\n", "5:14", "mcp.servers[0].args[1]: invalid type: integer, expected a string"},
		{"args not array", stdio + "args = 'a'\n", "5:1", "mcp.servers[0].args: invalid type: string, expected an array of strings"},
		{"header value not string", stdio + "headers = { A = true }\n", "5:13", "mcp.servers[0].headers.A: invalid type: boolean, expected a string"},

		// [providers] and [[providers.entries]].
		{"providers unknown key", "[providers]\nentries = []\ndefault = 'x'\n", "3:1", `unknown key "default" in providers`},
		{"providers entries not array", "providers.entries = 1\n", "1:11", "providers.entries: invalid type: integer"},
		{"provider missing name", "[[providers.entries]]\nprovider = 'openai'\n", "1:3", `providers.entries[0]: missing field "name"`},
		{"provider blank name", "[[providers.entries]]\nname = ''\nprovider = 'openai'\n", "2:1", "provider name must not be blank"},
		{"provider duplicate name", openai + openai, "7:1", `duplicate provider name "p" (first defined by providers.entries[0])`},
		{"provider missing kind", "[[providers.entries]]\nname = 'p'\nmodel = 'm'\n", "1:3", `missing field "provider"`},
		{"provider unknown kind", "[[providers.entries]]\nname = 'p'\nprovider = 'gemini'\n", "3:1", `unknown provider "gemini"`},
		{"provider missing model", "[[providers.entries]]\nname = 'p'\nprovider = 'anthropic'\nauth_token = 't'\n", "1:3", `missing field "model"`},
		{"provider missing auth_token", "[[providers.entries]]\nname = 'p'\nprovider = 'openai'\nmodel = 'm'\n", "1:3", `missing field "auth_token"`},
		{"max_tokens negative", openai + "max_tokens = -1\n", "6:1", "max_tokens: -1 is out of range"},
		{"max_tokens above u32", openai + "max_tokens = 4294967296\n", "6:1", "max_tokens: 4294967296 is out of range"},
		{"max_tokens float", openai + "max_tokens = 1.5\n", "6:1", "max_tokens: invalid type: float, expected an integer"},
		{"model not string", "[[providers.entries]]\nname = 'p'\nprovider = 'openai'\nmodel = 1\n", "4:1", "model: invalid type: integer"},

		// [telemetry].
		{"telemetry unknown key", "[telemetry]\nendpoint = 'x'\n", "2:1", `unknown key "endpoint" in telemetry`},
		{"telemetry unknown key when disabled", "[telemetry]\nenabled = false\nfoo = 1\n", "3:1", `unknown key "foo" in telemetry`},
		{"telemetry.traces unknown key", "[telemetry.traces]\nratio = 1\n", "2:1", `unknown key "ratio" in telemetry.traces`},
		{"telemetry.metrics unknown key", "[telemetry.metrics]\nexporter = 'x'\n", "2:1", `unknown key "exporter" in telemetry.metrics`},
		{"telemetry enabled not bool", "[telemetry]\nenabled = 'yes'\n", "2:1", "telemetry.enabled: invalid type: string, expected a boolean"},
		{"sample_ratio not number", "[telemetry]\nsample_ratio = '1'\n", "2:1", "telemetry.sample_ratio: invalid type: string"},
		{"disabled not strings", "[telemetry.metrics]\ndisabled = [1]\n", "2:13", "telemetry.metrics.disabled[0]: invalid type: integer"},
		{"endpoint missing", "[telemetry]\nenabled = true\n", "2:1", "otlp_endpoint is required"},
		{"endpoint blank", "[telemetry]\nenabled = true\notlp_endpoint = ' '\n", "3:1", "otlp_endpoint is required"},
		{"endpoint not http", "[telemetry]\nenabled = true\notlp_endpoint = 'grpc://c:4317'\n", "3:1", "must be an http:// or https:// URL"},
		{"endpoint without scheme", "[telemetry]\nenabled = true\notlp_endpoint = 'collector:4317'\n", "3:1", "must be an http:// or https:// URL"},
		{"endpoint without host", "[telemetry]\nenabled = true\notlp_endpoint = 'http://'\n", "3:1", "must be an http:// or https:// URL"},
		{"ratio above one", tel + "sample_ratio = 1.5\n", "4:1", "sample_ratio must be a finite number between 0 and 1"},
		{"ratio negative", tel + "sample_ratio = -0.1\n", "4:1", "sample_ratio must be a finite number"},
		{"ratio nan", tel + "sample_ratio = nan\n", "4:1", "sample_ratio must be a finite number"},
		{"ratio inf", tel + "sample_ratio = inf\n", "4:1", "sample_ratio must be a finite number"},
		{"unknown metric", tel + "[telemetry.metrics]\ndisabled = ['bae.sessions.open', 'bae.nope']\n", "5:34", `unknown metric name "bae.nope"`},
		{"invalid header name", tel + "otlp_headers = { 'bad name' = 'x' }\n", "4:18", `invalid header name "bad name"`},
		{"empty header name", tel + "otlp_headers = { '' = 'x' }\n", "4:18", `invalid header name ""`},
		{"invalid header value", tel + "otlp_headers = { a = \"x\\ny\" }\n", "4:18", `invalid value for header "a"`},
		{"resolved header value invalid", tel + "otlp_headers = { a = '${NL}' }\n", "4:18", `invalid value for header "a"`},
		{"unset header variable", tel + "otlp_headers = { Authorization = 'Bearer ${OTEL_TOKEN}' }\n", "4:18", `"OTEL_TOKEN" is not set`},
		{"unterminated header variable", tel + "otlp_headers = { a = '${SECRET' }\n", "4:18", "unterminated"},
	}
	lookup := env("SECRET", "hunter2", "NL", "line\nbreak")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc), lookup)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not *Error", err, err)
			}
			wantPrefix := "bae-config.toml: "
			if tt.pos != "" {
				wantPrefix = "bae-config.toml:" + tt.pos + ": "
			}
			if !strings.HasPrefix(err.Error(), wantPrefix) {
				t.Errorf("error %q does not start with %q", err, wantPrefix)
			}
			if !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("message %q does not contain %q", ce.Msg, tt.msg)
			}
			for _, secret := range []string{"hunter2", "line\nbreak"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q leaks a resolved value", err)
				}
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	if got := (&Error{Line: 3, Column: 7, Msg: "bad"}).Error(); got != "bae-config.toml:3:7: bad" {
		t.Fatalf("positioned error = %q", got)
	}
	if got := (&Error{Msg: "bad"}).Error(); got != "bae-config.toml: bad" {
		t.Fatalf("unpositioned error = %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{"", filepath.Join(dir, "missing.toml"), filepath.Join(dir, "no", "such", "dir.toml")} {
		f, err := Load(path, nil)
		if err != nil {
			t.Fatalf("Load(%q): %v", path, err)
		}
		if diff := cmp.Diff(empty(), f); diff != "" {
			t.Fatalf("Load(%q) mismatch (-want +got):\n%s", path, diff)
		}
	}

	path := filepath.Join(dir, "bae-config.toml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path, env("OTEL_TOKEN", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.MCP) != 3 || len(f.Providers) != 3 || !f.Telemetry.Enabled {
		t.Fatalf("Load(%q) = %+v", path, f)
	}

	// A file that exists but cannot be read is an error, not an empty config.
	_, err = Load(dir, nil)
	var ce *Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "cannot read") {
		t.Fatalf("Load(directory) error = %v, want a read *Error", err)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[[mcp.servers]]\nname = 'a'\ntransport = 'x'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, nil); err == nil || !strings.HasPrefix(err.Error(), "bae-config.toml:3:1: ") {
		t.Fatalf("Load(bad) error = %v", err)
	}
}

func TestRegistry(t *testing.T) {
	f, err := Parse([]byte(full), env("OTEL_TOKEN", "x"))
	if err != nil {
		t.Fatal(err)
	}
	r := f.Registry()
	if diff := cmp.Diff(f.Providers, r.Providers); diff != "" {
		t.Fatalf("providers (-file +registry):\n%s", diff)
	}
	if diff := cmp.Diff(f.MCP, r.MCPServers); diff != "" {
		t.Fatalf("mcp servers (-file +registry):\n%s", diff)
	}
	p, ok := r.Provider("anthropic-sonnet")
	if !ok || p.MaxTokens != 8096 {
		t.Fatalf("Provider(anthropic-sonnet) = %+v, %v", p, ok)
	}
	// The registry is a copy: changing it leaves the file alone.
	r.Providers[0].Model = "changed"
	r.MCPServers[2].Headers["Authorization"] = "changed"
	r.MCPServers[1].Args[0] = "changed"
	if f.Providers[0].Model == "changed" || f.MCP[2].Headers["Authorization"] == "changed" || f.MCP[1].Args[0] == "changed" {
		t.Fatal("Registry shares memory with the File")
	}

	if r := empty().Registry(); r.Providers == nil || r.MCPServers == nil || len(r.Providers)+len(r.MCPServers) != 0 {
		t.Fatalf("empty registry = %+v", r)
	}
}

func TestRedacted(t *testing.T) {
	f, err := Parse([]byte(full), env("OTEL_TOKEN", "otel-secret"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(f.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	const b = "••••••••"
	want := `{"mcp":{"servers":[` +
		`{"name":"events","transport":"sse","command":null,"args":[],"url":"http://localhost:9000/sse","headers":{}},` +
		`{"name":"filesystem","transport":"stdio","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","${DATA_DIR}"],"url":null,"headers":{}},` +
		`{"name":"web","transport":"http","command":null,"args":[],"url":"https://mcp.example.com/mcp","headers":{"Authorization":"` + b + `","X-Tenant":"` + b + `"}}]},` +
		`"providers":{"entries":[` +
		`{"name":"anthropic-sonnet","provider":"anthropic","model":"claude-sonnet-4-6","base_url":"https://proxy.internal","auth_token":"` + b + `"},` +
		`{"name":"offline","provider":"scripted","model":"scripted","base_url":"","auth_token":"` + b + `"},` +
		`{"name":"openai-mini","provider":"openai","model":"gpt-4o-mini","base_url":"https://api.openai.com","auth_token":"` + b + `"}]},` +
		`"telemetry":{"enabled":true,"otlp_endpoint":"http://collector:4317","otlp_headers":{"Authorization":"` + b + `","x-team":"` + b + `"},` +
		`"sample_ratio":0.25,"service_name":"baton-prod","traces":{"enabled":false},"metrics":{"enabled":true,"disabled":["bae.tool.latency","bae.events.total"]}}}`
	if string(got) != want {
		t.Fatalf("Redacted JSON\n got: %s\nwant: %s", got, want)
	}
	for _, secret := range []string{"otel-secret", "MCP_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "acme", "core"} {
		if strings.Contains(string(got), secret) {
			t.Errorf("redacted snapshot contains %q", secret)
		}
	}
	if utf8 := []rune(b); len(utf8) != 8 || slices.ContainsFunc(utf8, func(r rune) bool { return r != '\u2022' }) || Redaction != b {
		t.Fatalf("redaction marker %q is not eight U+2022 bullets", Redaction)
	}
}

func TestRedactedEmpty(t *testing.T) {
	got, err := json.Marshal(empty().Redacted())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mcp":{"servers":[]},"providers":{"entries":[]},"telemetry":{"enabled":false,"otlp_endpoint":null,"otlp_headers":{},` +
		`"sample_ratio":1.0,"service_name":"baesrv","traces":{"enabled":true},"metrics":{"enabled":true,"disabled":[]}}}`
	if string(got) != want {
		t.Fatalf("Redacted JSON of the empty config\n got: %s\nwant: %s", got, want)
	}
}

func TestRedactedEmptySecrets(t *testing.T) {
	// Empty values are redacted too, and disabled telemetry shows header
	// keys without resolving anything.
	doc := "[[mcp.servers]]\nname='a'\ntransport='sse'\nurl='http://h'\nheaders={X=''}\n" +
		"[telemetry]\notlp_headers={k='${UNSET}'}\nsample_ratio=0.5\n"
	f, err := Parse([]byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(f.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"headers":{"X":"••••••••"}`, `"otlp_headers":{"k":"••••••••"}`, `"sample_ratio":0.5`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("Redacted JSON %s lacks %s", got, want)
		}
	}
}

func TestRatioJSON(t *testing.T) {
	for in, want := range map[float64]string{0: "0.0", 1: "1.0", 0.25: "0.25", 1e-7: "1e-07"} {
		got, err := json.Marshal(ratio(in))
		if err != nil || string(got) != want {
			t.Errorf("ratio(%v) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		full,
		"",
		"[mcp\n",
		"mcp.servers = [{name = 'a', transport = 'stdio', command = 'c'}]",
		"[[mcp.servers]]\nname='a'\ntransport='http'\nurl='http://x'\n[mcp.servers.headers]\nA='b'\n",
		"[[providers.entries]]\nname='a'\nprovider='scripted'\nmax_tokens=-5\n",
		"[telemetry]\nenabled=true\notlp_endpoint='http://c'\notlp_headers={a='${X'}\n",
		"[[a.b]]\n[[a.b.c]]\nx=1\n[a.b.d]\ny=2\n",
		"a = [[{b = 1}]]\n",
		"x = 1979-05-27T07:32:00Z\n[telemetry]\nservice_name = 1979-05-27\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, env("X", "1"))
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is %T, not *Error", err, err)
			}
			if ce.Line < 0 || ce.Column < 0 || (ce.Line == 0) != (ce.Column == 0) {
				t.Fatalf("bad position in %v", ce)
			}
			return
		}
		if !slices.IsSortedFunc(file.MCP, func(a, b baton.MCPServer) int { return strings.Compare(a.Name, b.Name) }) ||
			!slices.IsSortedFunc(file.Providers, func(a, b baton.ProviderEntry) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatal("registries are not sorted by name")
		}
		if _, err := json.Marshal(file.Redacted()); err != nil {
			t.Fatalf("Redacted does not marshal: %v", err)
		}
	})
}
