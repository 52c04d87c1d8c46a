package baton

// Provider kinds.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
	ProviderScripted  = "scripted" // Baton's offline deterministic model
)

// ProviderEntry is one named entry of the [providers] registry in
// bae-config.toml. AuthToken is the raw template (it may hold ${VAR}
// references) and is resolved just before each call.
type ProviderEntry struct {
	Name      string
	Provider  string // ProviderAnthropic, ProviderOpenAI or ProviderScripted
	BaseURL   string // explicit value; empty means the kind's default
	Model     string
	AuthToken string
	MaxTokens int
}

// EffectiveBaseURL returns BaseURL or the default of the provider kind.
func (p *ProviderEntry) EffectiveBaseURL() string {
	if p.BaseURL != "" {
		return p.BaseURL
	}
	switch p.Provider {
	case ProviderAnthropic:
		return "https://api.anthropic.com"
	case ProviderOpenAI:
		return "https://api.openai.com"
	}
	return ""
}

// MCP transports.
const (
	MCPStdio = "stdio"
	MCPSSE   = "sse"
	MCPHTTP  = "http"
)

// MCPServer is one named entry of the [mcp] registry. Command, Args and
// header values are raw templates that may hold ${VAR} references.
type MCPServer struct {
	Name      string
	Transport string
	Command   string
	Args      []string
	URL       string
	Headers   map[string]string
}

// Registry is the startup snapshot of bae-config.toml's named providers and
// MCP servers, each sorted by name.
type Registry struct {
	Providers  []ProviderEntry
	MCPServers []MCPServer
}

// Provider looks up a provider entry by name.
func (r *Registry) Provider(name string) (*ProviderEntry, bool) {
	for i := range r.Providers {
		if r.Providers[i].Name == name {
			return &r.Providers[i], true
		}
	}
	return nil, false
}
