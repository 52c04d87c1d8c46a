package executor

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/baton-engine/baton/executor/proto"
)

// Scope kinds: what a credential stands for.
const (
	ScopeEnvironment = "environment" // a pool of interchangeable tool executors
	ScopeMachine     = "machine"     // one host serving a shell and/or a brain
)

// CredentialPrefix starts every executor credential.
const CredentialPrefix = "bae_exc_"

// Scope names the environment or machine a credential belongs to.
type Scope struct {
	Kind string // ScopeEnvironment or ScopeMachine
	ID   string // env_… or mch_…
}

// Environment is the scope of an environment-scoped executor.
func Environment(id string) Scope { return Scope{Kind: ScopeEnvironment, ID: id} }

// Machine is the scope of a machine-scoped executor.
func Machine(id string) Scope { return Scope{Kind: ScopeMachine, ID: id} }

// Config configures an Executor. BaseURL, Credential and Scope are
// required; zero durations take the defaults documented on each field.
type Config struct {
	// BaseURL is the harness's client origin, e.g. "https://baton.example".
	BaseURL string
	// Credential is the long-lived secret (bae_exc_…) exchanged for
	// short-lived executor tokens.
	Credential string
	Scope      Scope
	// ExecutorID, when set, is the id the executor registers with, so
	// that a restarted process keeps its identity.
	ExecutorID string

	// Capabilities declares the shell and the brain. The tools come
	// from Tools.
	Capabilities Capabilities
	// Tools are served under their Def.Name.
	Tools []Tool
	// Process serves tool.call "process.exec". Nil with
	// Capabilities.Process set means a Shell in the working directory.
	Process ProcessHandler
	// Agent serves turns; it is required with Capabilities.Agent.
	Agent Agent
	// Files serves fs.mount and fs.unmount (session file views); nil
	// answers them -32012 with capability "fs.fuse".
	Files *FileMounts

	Logger     *slog.Logger // nil discards
	HTTPClient *http.Client // nil is http.DefaultClient

	// ReconnectMin and ReconnectMax bound the exponential backoff between
	// connection attempts (defaults 500ms and 30s); each wait is
	// jittered between half and all of its step.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// RefreshBefore is how long before the executor token expires a
	// fresh one is fetched and sent (default 5m; at most half the
	// token's remaining life).
	RefreshBefore time.Duration
	// WriteTimeout bounds one WebSocket write and the wait for the answer
	// to executor.register and session.ready (default 10s).
	WriteTimeout time.Duration
	// DoneCalls is how many finished tool_call_ids are remembered to ack
	// duplicates without re-running them (default 4096).
	DoneCalls int
}

func (c *Config) validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("config: BaseURL is required"))
	} else if !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		errs = append(errs, fmt.Errorf("BaseURL %q must be http:// or https://", c.BaseURL))
	}
	if !strings.HasPrefix(c.Credential, CredentialPrefix) {
		errs = append(errs, errors.New("config: Credential must be a "+CredentialPrefix+"… secret"))
	}
	switch c.Scope.Kind {
	case ScopeEnvironment, ScopeMachine:
	default:
		errs = append(errs, fmt.Errorf("Scope.Kind %q must be %q or %q", c.Scope.Kind, ScopeEnvironment, ScopeMachine))
	}
	if c.Scope.ID == "" {
		errs = append(errs, errors.New("Scope.ID is required"))
	}
	if c.Files != nil {
		if err := c.Files.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Capabilities.Agent != nil && c.Agent == nil {
		errs = append(errs, errors.New("Capabilities.Agent needs an Agent"))
	}
	if c.Scope.Kind == ScopeMachine && c.Capabilities.Process == nil && c.Capabilities.Agent == nil {
		errs = append(errs, errors.New("a machine-scoped executor must declare Capabilities.Process or Capabilities.Agent"))
	}
	seen := map[string]bool{}
	for _, t := range c.Tools {
		switch {
		case t.Def.Name == "":
			errs = append(errs, errors.New("a tool has no name"))
		case t.Def.Name == ProcessExec:
			errs = append(errs, errors.New("tool name "+ProcessExec+" is reserved for the Process handler"))
		case seen[t.Def.Name]:
			errs = append(errs, fmt.Errorf("tool %q is declared twice", t.Def.Name))
		case t.Handle == nil:
			errs = append(errs, fmt.Errorf("tool %q has no Handle", t.Def.Name))
		}
		seen[t.Def.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("executor: invalid config: %w", err)
	}
	return nil
}

// withDefaults returns a copy with defaults filled in.
func (c Config) withDefaults() Config {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.ReconnectMin <= 0 {
		c.ReconnectMin = 500 * time.Millisecond
	}
	if c.ReconnectMax <= 0 {
		c.ReconnectMax = 30 * time.Second
	}
	if c.ReconnectMax < c.ReconnectMin {
		c.ReconnectMax = c.ReconnectMin
	}
	if c.RefreshBefore <= 0 {
		c.RefreshBefore = 5 * time.Minute
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.DoneCalls <= 0 {
		c.DoneCalls = 4096
	}
	if c.Capabilities.Process != nil && c.Process == nil {
		c.Process = &Shell{}
	}
	if c.Process != nil && c.Capabilities.Process == nil {
		c.Capabilities.Process = &ProcessCapability{}
	}
	return c
}

// Capabilities is what the executor offers beyond its tools (those come
// from Config.Tools). Nil members are not declared.
type Capabilities struct {
	Process *ProcessCapability `json:"process,omitempty"`
	Agent   *AgentCapability   `json:"agent,omitempty"`
}

// ProcessCapability declares a remote shell. MaxSessions 0 means no
// limit.
type ProcessCapability = proto.ProcessCapability

// AgentCapability declares a brain. MaxSessions 0 means no limit.
type AgentCapability = proto.AgentCapability
