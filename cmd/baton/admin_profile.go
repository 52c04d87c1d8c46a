package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/adminapi/adminclient"
)

// profileBody is the POST/PUT body of /admin/v1/profiles. The lists are
// always sent (never null); the Baton extensions are left out when unset,
// so a BAE server sees exactly what baectl would send.
type profileBody struct {
	Name               string            `json:"name"`
	PrimaryProvider    string            `json:"primary_provider"`
	FallbackProviders  []string          `json:"fallback_providers"`
	MCPServers         []string          `json:"mcp_servers"`
	AllowedTools       []json.RawMessage `json:"allowed_tools"`
	AvailableSandboxes []string          `json:"available_sandboxes"`
	SystemPrompt       string            `json:"system_prompt,omitempty"`
	MaxIterations      int               `json:"max_iterations,omitempty"`
	// Baton's executor extensions, also left out when unset.
	ExecutorEnvironments []string   `json:"executor_environments,omitempty"`
	Brain                *brainBody `json:"brain,omitempty"`
}

// brainBody is a profile's brain: {"type":"server"} or
// {"type":"executor","machine_id":"mch_…"}.
type brainBody struct {
	Type      string `json:"type"`
	MachineID string `json:"machine_id,omitempty"`
}

// profileView is a profile as the admin API returns it.
type profileView struct {
	ID string `json:"id"`
	profileBody
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// profileCreated is the 201 body of POST /admin/v1/profiles.
type profileCreated struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

// profileFlags are the optional profile fields settable from flags.
type profileFlags struct {
	fallback     []string
	mcp          []string
	tools        []string
	sandboxes    []string
	systemPrompt string
	maxIter      int
	environments []string
	brainMachine string
}

func (f *profileFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.fallback, "fallback", nil, "fallback provider, tried in order after the primary (repeatable)")
	fl.StringArrayVar(&f.mcp, "mcp-server", nil, "MCP server name from the server config (repeatable)")
	fl.StringArrayVar(&f.tools, "allowed-tool", nil, "tool the profile may call (repeatable)")
	fl.StringArrayVar(&f.sandboxes, "sandbox", nil, "sandbox image the profile may use (repeatable)")
	fl.StringVar(&f.systemPrompt, "system-prompt", "", "system prompt for every session (Baton extension)")
	fl.IntVar(&f.maxIter, "max-iterations", 0, "provider round trips per turn, 0 for the server default (Baton extension)")
	fl.StringArrayVar(&f.environments, "executor-environment", nil, "environment id whose tool executors serve the profile (repeatable; Baton extension)")
	fl.StringVar(&f.brainMachine, "brain-machine", "", "machine id whose agent executor runs the turns; empty for the server (Baton extension)")
}

// apply copies the flags the user gave into b. An empty value is dropped,
// so a flag given only an empty value sets an empty list.
func (f *profileFlags) apply(cmd *cobra.Command, b *profileBody) error {
	fl := cmd.Flags()
	if fl.Changed("fallback") {
		b.FallbackProviders = nonEmpty(f.fallback)
	}
	if fl.Changed("mcp-server") {
		b.MCPServers = nonEmpty(f.mcp)
	}
	if fl.Changed("allowed-tool") {
		b.AllowedTools = []json.RawMessage{}
		for _, t := range nonEmpty(f.tools) {
			raw, _ := json.Marshal(t) // a string always marshals
			b.AllowedTools = append(b.AllowedTools, raw)
		}
	}
	if fl.Changed("sandbox") {
		b.AvailableSandboxes = nonEmpty(f.sandboxes)
	}
	if fl.Changed("system-prompt") {
		b.SystemPrompt = f.systemPrompt
	}
	if fl.Changed("max-iterations") {
		if f.maxIter < 0 {
			return usageErr(fmt.Errorf("--max-iterations must not be negative, got %d", f.maxIter))
		}
		b.MaxIterations = f.maxIter
	}
	if fl.Changed("executor-environment") {
		b.ExecutorEnvironments = nonEmpty(f.environments)
	}
	if fl.Changed("brain-machine") {
		b.Brain = &brainBody{Type: "server"}
		if m := strings.TrimSpace(f.brainMachine); m != "" {
			b.Brain = &brainBody{Type: "executor", MachineID: m}
		}
	}
	b.fill()
	return nil
}

// fill turns null lists into empty ones: PUT is a full replacement and BAE
// validates each list as an array.
func (b *profileBody) fill() {
	if b.FallbackProviders == nil {
		b.FallbackProviders = []string{}
	}
	if b.MCPServers == nil {
		b.MCPServers = []string{}
	}
	if b.AllowedTools == nil {
		b.AllowedTools = []json.RawMessage{}
	}
	if b.AvailableSandboxes == nil {
		b.AvailableSandboxes = []string{}
	}
}

func nonEmpty(vals []string) []string {
	out := []string{}
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func profileRow(p *profileView) []string {
	return []string{p.ID, p.Name, p.PrimaryProvider}
}

func (a *adminCLI) profilesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "profiles",
		Aliases: []string{"profile"},
		Short:   "Manage profiles",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.profileCreateCmd(), a.profileListCmd(), a.profileGetCmd(), a.profileUpdateCmd(), a.profileDeleteCmd())
	return cmd
}

func (a *adminCLI) profileCreateCmd() *cobra.Command {
	var f profileFlags
	cmd := &cobra.Command{
		Use:   "create <name> <primary_provider>",
		Short: "Create a profile",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			b := profileBody{Name: args[0], PrimaryProvider: args[1]}
			if err := f.apply(cmd, &b); err != nil {
				return err
			}
			var raw json.RawMessage
			if err := cl.post(cmd.Context(), "/admin/v1/profiles", &b, &raw); err != nil {
				return err
			}
			var p profileCreated
			if json.Unmarshal(raw, &p) != nil || p.ID == "" {
				return runtimeErr(adminclient.ErrUnexpected)
			}
			if a.json {
				return a.printJSON(raw)
			}
			_, err = fmt.Fprintf(a.c.stdout, "created profile %s (%s)\n", p.ID, p.Name)
			return err
		},
	}
	f.register(cmd)
	return cmd
}

func (a *adminCLI) profileListCmd() *cobra.Command {
	var pf pageFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List profiles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &pf, listSpec{
				path: "/admin/v1/profiles", empty: "no profiles found",
				header: []string{"ID", "NAME", "PRIMARY_PROVIDER"},
				row:    rowOf(profileRow),
			})
		},
	}
	pf.register(cmd)
	return cmd
}

// getProfile fetches one profile; raw is the body as the server sent it.
func getProfile(cmd *cobra.Command, cl *adminClient, id string) (*profileView, json.RawMessage, error) {
	var raw json.RawMessage
	if err := cl.get(cmd.Context(), "/admin/v1/profiles/"+url.PathEscape(id), nil, &raw); err != nil {
		return nil, nil, err
	}
	p := new(profileView)
	if json.Unmarshal(raw, p) != nil || p.ID == "" {
		return nil, nil, runtimeErr(adminclient.ErrUnexpected)
	}
	return p, raw, nil
}

// printProfile shows one profile as JSON or as name/value lines.
func (a *adminCLI) printProfile(p *profileView, raw json.RawMessage) error {
	if a.json {
		return a.printJSON(raw)
	}
	tools := make([]string, 0, len(p.AllowedTools))
	for _, t := range p.AllowedTools {
		var s string
		if json.Unmarshal(t, &s) != nil {
			s = string(t) // BAE does not check element types
		}
		tools = append(tools, s)
	}
	rows := [][]string{
		{"ID", p.ID},
		{"NAME", p.Name},
		{"PRIMARY_PROVIDER", p.PrimaryProvider},
		{"FALLBACK_PROVIDERS", dash(strings.Join(p.FallbackProviders, ", "))},
		{"MCP_SERVERS", dash(strings.Join(p.MCPServers, ", "))},
		{"ALLOWED_TOOLS", dash(strings.Join(tools, ", "))},
		{"AVAILABLE_SANDBOXES", dash(strings.Join(p.AvailableSandboxes, ", "))},
	}
	if p.SystemPrompt != "" {
		rows = append(rows, []string{"SYSTEM_PROMPT", strconv.Quote(p.SystemPrompt)})
	}
	if p.MaxIterations != 0 {
		rows = append(rows, []string{"MAX_ITERATIONS", strconv.Itoa(p.MaxIterations)})
	}
	if len(p.ExecutorEnvironments) > 0 {
		rows = append(rows, []string{"EXECUTOR_ENVIRONMENTS", strings.Join(p.ExecutorEnvironments, ", ")})
	}
	if p.Brain != nil && p.Brain.Type != "" {
		brain := p.Brain.Type
		if p.Brain.MachineID != "" {
			brain += " (" + p.Brain.MachineID + ")"
		}
		rows = append(rows, []string{"BRAIN", brain})
	}
	rows = append(rows, []string{"CREATED_AT", p.CreatedAt}, []string{"UPDATED_AT", p.UpdatedAt})
	for i := range rows {
		rows[i][0] += ":"
	}
	return writeTable(a.c.stdout, nil, rows)
}

func (a *adminCLI) profileGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get <id>",
		Short: "Show one profile",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			p, raw, err := getProfile(cmd, cl, args[0])
			if err != nil {
				return err
			}
			return a.printProfile(p, raw)
		},
	}
}

func (a *adminCLI) profileUpdateCmd() *cobra.Command {
	var f profileFlags
	var name string
	cmd := &cobra.Command{
		Use:   "update <id> <primary_provider>",
		Short: "Change a profile, keeping every field whose flag is not given",
		Long: `Change a profile. The server replaces a profile as a whole (PUT), so this
command first fetches the current profile and sends it back with only the
fields you set replaced: the primary provider, --name when given, and each
list or setting whose flag is given. A list flag replaces the whole list;
pass it an empty value (--fallback '') to clear the list.

Unlike BAE's baectl, lists you do not mention (including the sandbox images)
are kept, not wiped.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			cur, _, err := getProfile(cmd, cl, args[0])
			if err != nil {
				return err
			}
			b := cur.profileBody
			b.PrimaryProvider = args[1]
			if b.MaxIterations == baton.DefaultMaxIterations {
				// Baton reports the effective cap; sending the
				// default back would pin it.
				b.MaxIterations = 0
			}
			if cmd.Flags().Changed("name") {
				b.Name = name
			}
			if err := f.apply(cmd, &b); err != nil {
				return err
			}
			var raw json.RawMessage
			if err := cl.put(cmd.Context(), "/admin/v1/profiles/"+url.PathEscape(args[0]), &b, &raw); err != nil {
				return err
			}
			p := new(profileView)
			if json.Unmarshal(raw, p) != nil || p.ID == "" {
				return runtimeErr(adminclient.ErrUnexpected)
			}
			return a.printProfile(p, raw)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "new profile name (default: keep the current one)")
	f.register(cmd)
	return cmd
}

func (a *adminCLI) profileDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete <id>",
		Short: "Delete a profile (its client keys must be revoked first)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			if err := cl.del(cmd.Context(), "/admin/v1/profiles/"+url.PathEscape(args[0])); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.c.stdout, "deleted profile %s\n", args[0])
			return err
		},
	}
}
