package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"

	"github.com/baton-engine/baton"
)

// FileName is the conventional name of the config file; it prefixes every
// error message.
const FileName = "bae-config.toml"

// Defaults of the [telemetry] table and of provider entries.
const (
	DefaultServiceName = "baesrv"
	DefaultSampleRatio = 1.0
	DefaultMaxTokens   = 4096
	// DefaultScriptedModel is the model of a scripted provider entry that
	// names none.
	DefaultScriptedModel = "scripted"
)

// Error is a problem in the config file. Line and Column are 1-based and
// zero when the position is unknown.
type Error struct {
	Line   int
	Column int
	Msg    string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return FileName + ":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column) + ": " + e.Msg
	}
	return FileName + ": " + e.Msg
}

// File is a loaded and validated bae-config.toml.
type File struct {
	MCP       []baton.MCPServer     // sorted by name
	Providers []baton.ProviderEntry // sorted by name
	Telemetry Telemetry
}

// Telemetry is the [telemetry] table. When Enabled is false nothing else in
// it was validated and OTLPHeaders holds the raw templates; when it is true
// OTLPHeaders holds the resolved values (never log them).
type Telemetry struct {
	Enabled      bool
	OTLPEndpoint *string // nil when not configured
	OTLPHeaders  map[string]string
	SampleRatio  float64
	ServiceName  string
	Traces       Traces
	Metrics      Metrics
}

// Traces is [telemetry.traces].
type Traces struct {
	Enabled bool
}

// Metrics is [telemetry.metrics]. Disabled names metrics, from the closed
// set of BAE's admin API, that are not exported.
type Metrics struct {
	Enabled  bool
	Disabled []string
}

// metricNames is the closed set of metric names [telemetry.metrics].disabled
// may list.
var metricNames = [...]string{
	"bae.sessions.open",
	"bae.sessions.total",
	"bae.events.total",
	"bae.profiles.count",
	"bae.keys.count",
	"bae.mcp.sessions.live",
	"bae.turns.pending",
	"bae.sandboxes.live",
	"bae.subagents.active",
	"bae.drivers.registered",
	"bae.turns.completed",
	"bae.provider.requests",
	"bae.provider.latency",
	"bae.tool.calls",
	"bae.tool.latency",
}

// empty returns the configuration of a missing or empty file.
func empty() *File {
	return &File{
		MCP:       []baton.MCPServer{},
		Providers: []baton.ProviderEntry{},
		Telemetry: Telemetry{
			OTLPHeaders: map[string]string{},
			SampleRatio: DefaultSampleRatio,
			ServiceName: DefaultServiceName,
			Traces:      Traces{Enabled: true},
			Metrics:     Metrics{Enabled: true, Disabled: []string{}},
		},
	}
}

// Load reads and parses the file at path. An empty path or a file that does
// not exist yields the empty configuration; a file that exists but cannot be
// read is an error. lookup resolves ${VAR} references in telemetry headers
// (nil knows no variable).
func Load(path string, lookup func(string) (string, bool)) (*File, error) {
	if path == "" {
		return empty(), nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return empty(), nil
	}
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("cannot read %s: %v", path, unwrapPath(err))}
	}
	return Parse(data, lookup)
}

// unwrapPath drops the *fs.PathError wrapper, whose text repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Registry returns the providers and MCP servers as the engine's startup
// snapshot. The slices are copies.
func (f *File) Registry() *baton.Registry {
	r := &baton.Registry{
		Providers:  slices.Clone(f.Providers),
		MCPServers: make([]baton.MCPServer, len(f.MCP)),
	}
	for i, s := range f.MCP {
		s.Args = slices.Clone(s.Args)
		s.Headers = cloneMap(s.Headers)
		r.MCPServers[i] = s
	}
	if r.Providers == nil {
		r.Providers = []baton.ProviderEntry{}
	}
	return r
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
