package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/pelletier/go-toml/v2"
)

// Parse decodes and validates the contents of a bae-config.toml. Errors are
// *Error. lookup resolves ${VAR} references in telemetry headers (nil knows
// no variable); the other templates are kept raw.
func Parse(data []byte, lookup func(string) (string, bool)) (f *File, err error) {
	// go-toml reports positions by slicing into the document; give it a
	// slice whose capacity ends where the document does.
	data = data[:len(data):len(data)]
	defer func() {
		// Belt and braces: a decoder bug on hostile input must not take
		// the process down.
		if r := recover(); r != nil {
			f, err = nil, &Error{Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	var root map[string]any
	if err := toml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(err)
	}
	p := &parser{data: data, lookup: lookup}
	out := empty()
	if out.MCP, err = p.mcp(root["mcp"]); err != nil {
		return nil, err
	}
	if out.Providers, err = p.providers(root["providers"]); err != nil {
		return nil, err
	}
	if err := p.telemetry(root["telemetry"], &out.Telemetry); err != nil {
		return nil, err
	}
	return out, nil
}

// syntaxError converts a go-toml error to an *Error with its position.
func syntaxError(err error) *Error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		return &Error{Line: line, Column: col, Msg: strings.TrimPrefix(de.Error(), "toml: ")}
	}
	return &Error{Msg: strings.TrimPrefix(err.Error(), "toml: ")}
}

// parser turns the generic decoding of a document into a File, checking
// every rule of BAE's admin API
type parser struct {
	data   []byte
	lookup func(string) (string, bool)
	loc    *Locator // built on the first error
}

// at is a location in the document: loc addresses the locator, show is
// what error messages print ("mcp.servers[2].url").
type at struct{ loc, show string }

func (a at) key(name string) at { return at{join(a.loc, name), join(a.show, name)} }

func (a at) index(i int) at {
	return at{join(a.loc, strconv.Itoa(i)), a.show + "[" + strconv.Itoa(i) + "]"}
}

func (p *parser) errorf(a at, format string, args ...any) error {
	if p.loc == nil {
		p.loc = Locate(p.data)
	}
	return p.loc.errorAt(a.loc, fmt.Sprintf(format, args...))
}

// table checks that v is a table and that it has only the keys allowed
// lists (nil allows any key).
func (p *parser) table(a at, v any, allowed ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.typeError(a, v, "a table")
	}
	if allowed == nil {
		return m, nil
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(allowed, k) {
			return nil, p.errorf(a.key(k), "unknown key %q in %s (expected one of %s)", k, a.show, strings.Join(allowed, ", "))
		}
	}
	return m, nil
}

func (p *parser) typeError(a at, v any, want string) error {
	return p.errorf(a, "%s: invalid type: %s, expected %s", a.show, typeName(v), want)
}

// str returns the string at m[name]; ok is false when the key is absent.
func (p *parser) str(a at, m map[string]any, name string) (s string, ok bool, err error) {
	v, ok := m[name]
	if !ok {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", true, p.typeError(a.key(name), v, "a string")
	}
	return s, true, nil
}

func (p *parser) boolean(a at, m map[string]any, name string, def bool) (bool, error) {
	v, ok := m[name]
	if !ok {
		return def, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, p.typeError(a.key(name), v, "a boolean")
	}
	return b, nil
}

func (p *parser) stringList(a at, m map[string]any, name string) ([]string, error) {
	out := []string{}
	v, ok := m[name]
	if !ok {
		return out, nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		return nil, p.typeError(a.key(name), v, "an array of strings")
	}
	for i, e := range arr {
		s, isStr := e.(string)
		if !isStr {
			return nil, p.typeError(a.key(name).index(i), e, "a string")
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) stringMap(a at, m map[string]any, name string) (map[string]string, error) {
	out := map[string]string{}
	v, ok := m[name]
	if !ok {
		return out, nil
	}
	t, isTable := v.(map[string]any)
	if !isTable {
		return nil, p.typeError(a.key(name), v, "a table of strings")
	}
	for _, k := range sortedKeys(t) {
		s, isStr := t[k].(string)
		if !isStr {
			return nil, p.typeError(a.key(name).key(k), t[k], "a string")
		}
		out[k] = s
	}
	return out, nil
}

// tables returns the array of tables at key name of section.
func (p *parser) tables(a at, m map[string]any, name string) ([]map[string]any, error) {
	v, ok := m[name]
	if !ok {
		return nil, nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		return nil, p.typeError(a.key(name), v, "an array of tables")
	}
	out := make([]map[string]any, len(arr))
	for i, e := range arr {
		t, isTable := e.(map[string]any)
		if !isTable {
			return nil, p.typeError(a.key(name).index(i), e, "a table")
		}
		out[i] = t
	}
	return out, nil
}

// name checks the required, non-blank, unique name of a registry entry.
func (p *parser) name(a at, m map[string]any, seen map[string]string, kind string) (string, error) {
	name, ok, err := p.str(a, m, "name")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", p.errorf(a, "%s: missing field \"name\"", a.show)
	}
	if strings.TrimSpace(name) == "" {
		return "", p.errorf(a.key("name"), "%s: %s name must not be blank", a.key("name").show, kind)
	}
	if first, dup := seen[name]; dup {
		return "", p.errorf(a.key("name"), "%s: duplicate %s name %q (first defined by %s)", a.key("name").show, kind, name, first)
	}
	seen[name] = a.show
	return name, nil
}

var mcpServerKeys = []string{"name", "transport", "command", "args", "url", "headers"}

func (p *parser) mcp(v any) ([]baton.MCPServer, error) {
	out := []baton.MCPServer{}
	if v == nil {
		return out, nil
	}
	sec := at{"mcp", "mcp"}
	m, err := p.table(sec, v, "servers")
	if err != nil {
		return nil, err
	}
	entries, err := p.tables(sec, m, "servers")
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for i, e := range entries {
		a := sec.key("servers").index(i)
		if _, err := p.table(a, e, mcpServerKeys...); err != nil {
			return nil, err
		}
		s, err := p.mcpServer(a, e, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (p *parser) mcpServer(a at, e map[string]any, seen map[string]string) (baton.MCPServer, error) {
	var s baton.MCPServer
	var err error
	if s.Name, err = p.name(a, e, seen, "mcp server"); err != nil {
		return s, err
	}
	transport, ok, err := p.str(a, e, "transport")
	if err != nil {
		return s, err
	}
	if !ok {
		return s, p.errorf(a, "%s: missing field \"transport\"", a.show)
	}
	command, _, err := p.str(a, e, "command")
	if err != nil {
		return s, err
	}
	if s.Args, err = p.stringList(a, e, "args"); err != nil {
		return s, err
	}
	u, _, err := p.str(a, e, "url")
	if err != nil {
		return s, err
	}
	if s.Headers, err = p.stringMap(a, e, "headers"); err != nil {
		return s, err
	}
	// Both are kept as written, whatever the transport (the snapshot shows
	// them as configured); only the transport's own one is used.
	s.Transport, s.Command, s.URL = transport, command, u
	switch transport {
	case baton.MCPStdio:
		if strings.TrimSpace(command) == "" {
			return s, p.errorf(a.key("command"), "%s: transport %q requires a non-blank command", a.show, transport)
		}
	case baton.MCPSSE, baton.MCPHTTP:
		if strings.TrimSpace(u) == "" {
			return s, p.errorf(a.key("url"), "%s: transport %q requires a non-blank url", a.show, transport)
		}
	default:
		return s, p.errorf(a.key("transport"), "%s: unknown transport %q (expected stdio, sse or http)", a.key("transport").show, transport)
	}
	return s, nil
}

func (p *parser) providers(v any) ([]baton.ProviderEntry, error) {
	out := []baton.ProviderEntry{}
	if v == nil {
		return out, nil
	}
	sec := at{"providers", "providers"}
	m, err := p.table(sec, v, "entries")
	if err != nil {
		return nil, err
	}
	entries, err := p.tables(sec, m, "entries")
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for i, e := range entries {
		// Unknown keys of provider entries are ignored (BAE's admin API).
		pe, err := p.provider(sec.key("entries").index(i), e, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, pe)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (p *parser) provider(a at, e map[string]any, seen map[string]string) (baton.ProviderEntry, error) {
	var pe baton.ProviderEntry
	var err error
	if pe.Name, err = p.name(a, e, seen, "provider"); err != nil {
		return pe, err
	}
	kind, ok, err := p.str(a, e, "provider")
	if err != nil {
		return pe, err
	}
	if !ok {
		return pe, p.errorf(a, "%s: missing field \"provider\"", a.show)
	}
	switch kind {
	case baton.ProviderAnthropic, baton.ProviderOpenAI, baton.ProviderScripted:
	default:
		return pe, p.errorf(a.key("provider"), "%s: unknown provider %q (expected anthropic, openai or scripted)", a.key("provider").show, kind)
	}
	pe.Provider = kind
	if pe.BaseURL, _, err = p.str(a, e, "base_url"); err != nil {
		return pe, err
	}
	if pe.Model, ok, err = p.str(a, e, "model"); err != nil {
		return pe, err
	}
	if !ok {
		if kind != baton.ProviderScripted {
			return pe, p.errorf(a, "%s: missing field \"model\"", a.show)
		}
		pe.Model = DefaultScriptedModel
	}
	if pe.AuthToken, ok, err = p.str(a, e, "auth_token"); err != nil {
		return pe, err
	}
	if !ok && kind != baton.ProviderScripted {
		return pe, p.errorf(a, "%s: missing field \"auth_token\"", a.show)
	}
	pe.MaxTokens = DefaultMaxTokens
	if v, ok := e["max_tokens"]; ok {
		n, isInt := v.(int64)
		if !isInt {
			return pe, p.typeError(a.key("max_tokens"), v, "an integer")
		}
		if n < 0 || n > math.MaxUint32 {
			return pe, p.errorf(a.key("max_tokens"), "%s: %d is out of range (0 to %d)", a.key("max_tokens").show, n, uint32(math.MaxUint32))
		}
		pe.MaxTokens = int(n)
	}
	return pe, nil
}

var telemetryKeys = []string{"enabled", "otlp_endpoint", "otlp_headers", "sample_ratio", "service_name", "traces", "metrics"}

func (p *parser) telemetry(v any, t *Telemetry) error {
	if v == nil {
		return nil
	}
	a := at{"telemetry", "telemetry"}
	m, err := p.table(a, v, telemetryKeys...)
	if err != nil {
		return err
	}
	if t.Enabled, err = p.boolean(a, m, "enabled", false); err != nil {
		return err
	}
	endpoint, hasEndpoint, err := p.str(a, m, "otlp_endpoint")
	if err != nil {
		return err
	}
	if hasEndpoint {
		t.OTLPEndpoint = &endpoint
	}
	if t.OTLPHeaders, err = p.stringMap(a, m, "otlp_headers"); err != nil {
		return err
	}
	if r, ok := m["sample_ratio"]; ok {
		switch r := r.(type) {
		case float64:
			t.SampleRatio = r
		case int64:
			t.SampleRatio = float64(r)
		default:
			return p.typeError(a.key("sample_ratio"), r, "a float")
		}
	}
	if name, ok, err := p.str(a, m, "service_name"); err != nil {
		return err
	} else if ok {
		t.ServiceName = name
	}
	if tv, ok := m["traces"]; ok {
		tr, err := p.table(a.key("traces"), tv, "enabled")
		if err != nil {
			return err
		}
		if t.Traces.Enabled, err = p.boolean(a.key("traces"), tr, "enabled", true); err != nil {
			return err
		}
	}
	if mv, ok := m["metrics"]; ok {
		ma := a.key("metrics")
		mt, err := p.table(ma, mv, "enabled", "disabled")
		if err != nil {
			return err
		}
		if t.Metrics.Enabled, err = p.boolean(ma, mt, "enabled", true); err != nil {
			return err
		}
		if t.Metrics.Disabled, err = p.stringList(ma, mt, "disabled"); err != nil {
			return err
		}
	}
	if !t.Enabled {
		return nil
	}
	return p.checkTelemetry(a, t)
}

// checkTelemetry applies the rules that hold only when telemetry is
// enabled, and resolves the ${VAR} references of the OTLP headers.
func (p *parser) checkTelemetry(a at, t *Telemetry) error {
	ea := a.key("otlp_endpoint")
	if t.OTLPEndpoint == nil || strings.TrimSpace(*t.OTLPEndpoint) == "" {
		if t.OTLPEndpoint == nil {
			ea = a.key("enabled")
		}
		return p.errorf(ea, "telemetry.otlp_endpoint is required when telemetry is enabled")
	}
	if u, err := url.Parse(*t.OTLPEndpoint); err != nil || u.Host == "" ||
		(!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) {
		return p.errorf(ea, "telemetry.otlp_endpoint must be an http:// or https:// URL")
	}
	if r := t.SampleRatio; math.IsNaN(r) || r < 0 || r > 1 {
		return p.errorf(a.key("sample_ratio"), "telemetry.sample_ratio must be a finite number between 0 and 1")
	}
	for i, name := range t.Metrics.Disabled {
		if !slices.Contains(metricNames[:], name) {
			return p.errorf(a.key("metrics").key("disabled").index(i), "telemetry.metrics.disabled: unknown metric name %q", name)
		}
	}
	resolved := make(map[string]string, len(t.OTLPHeaders))
	for _, k := range sortedKeys(t.OTLPHeaders) {
		ha := a.key("otlp_headers").key(k)
		if !validHeaderName(k) {
			return p.errorf(ha, "telemetry.otlp_headers: invalid header name %q", k)
		}
		v, err := baton.ExpandVars(t.OTLPHeaders[k], p.lookup)
		if err != nil {
			return p.errorf(ha, "telemetry.otlp_headers: header %q: %v", k, err)
		}
		if !validHeaderValue(v) {
			// Never echo the value: it is (or contains) a secret.
			return p.errorf(ha, "telemetry.otlp_headers: invalid value for header %q", k)
		}
		resolved[k] = v
	}
	t.OTLPHeaders = resolved
	return nil
}

// validHeaderName reports whether s is an HTTP field name (an RFC 9110
// token), which is what gRPC metadata keys must be.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s may be sent as a header value: visible
// ASCII, spaces and tabs only.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "datetime"
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
