package executor

import (
	"slices"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// Capabilities Target.Capability can ask for.
const (
	CapabilityProcess = "process"
	CapabilityAgent   = "agent"
)

// execRec is one executor known to the hub: connected, or detached and
// waiting for a resume while it still has sessions. Guarded by Hub.mu.
type execRec struct {
	id        string
	scope     string
	envID     string
	machineID string
	credID    string
	caps      proto.Capabilities
	conn      *conn               // nil while detached
	bindings  map[string]*Binding // by session id
	resume    baton.Timer         // the resume window, while detached
	detachGen int                 // tells a stale resume timer from the current one
}

// owner is the environment or machine id the executor serves.
func (r *execRec) owner() string {
	if r.scope == baton.ExecutorScopeMachine {
		return r.machineID
	}
	return r.envID
}

// serves reports whether the executor declares the tool.
func (r *execRec) serves(tool string) bool {
	return slices.ContainsFunc(r.caps.Tools, func(d proto.ToolDef) bool { return d.Name == tool })
}

// Target selects executors, for Assign and Executors. Empty fields match
// anything.
type Target struct {
	EnvironmentID string // environment-scoped executors of this environment
	MachineID     string // machine-scoped executors of this machine
	ExecutorID    string // exactly this executor
	Tool          string // executors declaring this tool
	Capability    string // CapabilityProcess or CapabilityAgent
}

func (t *Target) matches(r *execRec) bool {
	switch {
	case t.ExecutorID != "" && r.id != t.ExecutorID,
		t.EnvironmentID != "" && (r.scope != baton.ExecutorScopeEnvironment || r.envID != t.EnvironmentID),
		t.MachineID != "" && (r.scope != baton.ExecutorScopeMachine || r.machineID != t.MachineID),
		t.Tool != "" && !r.serves(t.Tool),
		t.Capability == CapabilityProcess && r.caps.Process == nil,
		t.Capability == CapabilityAgent && r.caps.Agent == nil:
		return false
	}
	return true
}

// full reports whether r has no room for another session of t's kind.
func (t *Target) full(r *execRec) bool {
	var limit int
	switch {
	case t.Capability == CapabilityProcess && r.caps.Process != nil:
		limit = r.caps.Process.MaxSessions
	case t.Capability == CapabilityAgent && r.caps.Agent != nil:
		limit = r.caps.Agent.MaxSessions
	}
	return limit > 0 && len(r.bindings) >= limit
}

// Info describes one executor in the registry.
type Info struct {
	ID            string
	Scope         string // baton.ExecutorScopeEnvironment or baton.ExecutorScopeMachine
	EnvironmentID string
	MachineID     string
	CredentialID  string
	Capabilities  proto.Capabilities
	// Connected is false while the executor is detached (within its
	// resume window); ConnectionID and the deadlines are then zero.
	Connected      bool
	ConnectionID   string
	Protocol       string
	Draining       bool
	Sessions       []string // bound session ids, sorted
	RunningTools   int      // as last reported by a heartbeat
	LeaseExpiresAt time.Time
	TokenExpiresAt time.Time
}

// Executors lists the executors matching t, connected or detached, sorted
// by id.
func (h *Hub) Executors(t Target) []Info {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Info
	for _, r := range h.execs {
		if t.matches(r) {
			out = append(out, h.infoLocked(r))
		}
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Executor returns one executor by id.
func (h *Hub) Executor(id string) (Info, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.execs[id]
	if !ok {
		return Info{}, false
	}
	return h.infoLocked(r), true
}

func (h *Hub) infoLocked(r *execRec) Info {
	in := Info{
		ID: r.id, Scope: r.scope, EnvironmentID: r.envID, MachineID: r.machineID,
		CredentialID: r.credID, Capabilities: r.caps, Draining: h.draining,
	}
	for id := range r.bindings {
		in.Sessions = append(in.Sessions, id)
	}
	slices.Sort(in.Sessions)
	if c := r.conn; c != nil {
		in.Connected = true
		in.ConnectionID = c.id
		in.Protocol = c.protocol
		in.RunningTools = c.running
		in.LeaseExpiresAt = c.leaseExpires
		in.TokenExpiresAt = c.grant.ExpiresAt
	}
	return in
}

// candidatesLocked lists the connected executors that can take a new
// session for t, least loaded first.
func (h *Hub) candidatesLocked(t Target) []*execRec {
	var out []*execRec
	for _, r := range h.execs {
		if r.conn != nil && !r.conn.closing && t.matches(r) && !t.full(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *execRec) int {
		if d := len(a.bindings) - len(b.bindings); d != 0 {
			return d
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}
