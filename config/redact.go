package config

import (
	"math"
	"strconv"
	"strings"
)

// Redaction replaces every secret in the redacted snapshot: eight U+2022
// bullets, whatever the value (BAE's admin API).
const Redaction = "••••••••"

// The snapshot served by GET /admin/v1/config. Field order is the wire
// order.
type (
	redacted struct {
		MCP       redactedMCP       `json:"mcp"`
		Providers redactedProviders `json:"providers"`
		Telemetry redactedTelemetry `json:"telemetry"`
	}
	redactedMCP struct {
		Servers []redactedServer `json:"servers"`
	}
	redactedServer struct {
		Name      string            `json:"name"`
		Transport string            `json:"transport"`
		Command   *string           `json:"command"`
		Args      []string          `json:"args"`
		URL       *string           `json:"url"`
		Headers   map[string]string `json:"headers"`
	}
	redactedProviders struct {
		Entries []redactedEntry `json:"entries"`
	}
	redactedEntry struct {
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		Model     string `json:"model"`
		BaseURL   string `json:"base_url"`
		AuthToken string `json:"auth_token"`
	}
	redactedTelemetry struct {
		Enabled      bool              `json:"enabled"`
		OTLPEndpoint *string           `json:"otlp_endpoint"`
		OTLPHeaders  map[string]string `json:"otlp_headers"`
		SampleRatio  ratio             `json:"sample_ratio"`
		ServiceName  string            `json:"service_name"`
		Traces       redactedTraces    `json:"traces"`
		Metrics      redactedMetrics   `json:"metrics"`
	}
	redactedTraces struct {
		Enabled bool `json:"enabled"`
	}
	redactedMetrics struct {
		Enabled  bool     `json:"enabled"`
		Disabled []string `json:"disabled"`
	}
)

// ratio is a float that always marshals as a JSON float ("1.0", not "1"),
// as BAE's serializer writes it.
type ratio float64

func (r ratio) MarshalJSON() ([]byte, error) {
	f := float64(r)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		// Only reachable with telemetry disabled (validation rejects it
		// otherwise); JSON has no literal for it.
		return []byte("null"), nil
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return []byte(s), nil
}

// Redacted returns the JSON-marshalable snapshot GET /admin/v1/config
// serves: every list sorted by name, header keys kept, and every header
// value, OTLP header value and auth token replaced by Redaction.
func (f *File) Redacted() any {
	r := redacted{
		MCP:       redactedMCP{Servers: make([]redactedServer, 0, len(f.MCP))},
		Providers: redactedProviders{Entries: make([]redactedEntry, 0, len(f.Providers))},
	}
	for _, s := range f.MCP {
		rs := redactedServer{
			Name:      s.Name,
			Transport: s.Transport,
			Args:      append([]string{}, s.Args...),
			Headers:   redactMap(s.Headers),
		}
		if s.Command != "" {
			rs.Command = ptr(s.Command)
		}
		if s.URL != "" {
			rs.URL = ptr(s.URL)
		}
		r.MCP.Servers = append(r.MCP.Servers, rs)
	}
	for i := range f.Providers {
		p := &f.Providers[i]
		r.Providers.Entries = append(r.Providers.Entries, redactedEntry{
			Name:      p.Name,
			Provider:  p.Provider,
			Model:     p.Model,
			BaseURL:   p.EffectiveBaseURL(),
			AuthToken: Redaction,
		})
	}
	t := f.Telemetry
	r.Telemetry = redactedTelemetry{
		Enabled:     t.Enabled,
		OTLPHeaders: redactMap(t.OTLPHeaders),
		SampleRatio: ratio(t.SampleRatio),
		ServiceName: t.ServiceName,
		Traces:      redactedTraces{Enabled: t.Traces.Enabled},
		Metrics: redactedMetrics{
			Enabled:  t.Metrics.Enabled,
			Disabled: append([]string{}, t.Metrics.Disabled...),
		},
	}
	if t.OTLPEndpoint != nil {
		r.Telemetry.OTLPEndpoint = ptr(*t.OTLPEndpoint)
	}
	return r
}

// redactMap keeps the keys of m and replaces every value; encoding/json
// writes map keys sorted.
func redactMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = Redaction
	}
	return out
}

func ptr(s string) *string { return &s }
