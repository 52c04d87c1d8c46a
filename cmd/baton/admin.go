package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/adminapi/adminclient"
)

const (
	defaultAdminAddr = "127.0.0.1:8081"
	// devKeyFile is where `baton dev` writes its admin key (relative to the
	// working directory); it is probed before the BAE default.
	devKeyFile = "./baton-data/admin-key.pem"
	// defaultKeyFile is BAE's default BAE_ADMIN_KEY_FILE.
	defaultKeyFile = "/var/lib/bae/admin-key.pem"
)

// adminCLI holds the flags shared by every `baton admin` command.
type adminCLI struct {
	c       *cli
	addr    string
	token   string
	keyFile string
	json    bool
	// probes are the default key files, tried in order when no token or
	// key file was named.
	probes []string
}

func (c *cli) adminCmd() *cobra.Command {
	a := &adminCLI{c: c, probes: []string{devKeyFile, defaultKeyFile}}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage a running server through its admin API",
		Long: `Manage profiles, client keys and sessions of a running Baton (or BAE)
server through its admin API (/admin/v1), like BAE's baectl, Baton's
executor environments, machines and their credentials, and list the nodes
of a cluster.

The admin key is taken, first match wins, from --admin-token, BAE_ADMIN_TOKEN,
--admin-key-file, BAE_ADMIN_KEY_FILE, then the files ` + devKeyFile + `
(written by "baton dev") and ` + defaultKeyFile + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&a.addr, "admin-addr", "", "admin API address, host:port or URL (default $BAE_ADMIN_ADDR, else "+defaultAdminAddr+")")
	pf.StringVar(&a.token, "admin-token", "", "admin key (default $BAE_ADMIN_TOKEN)")
	pf.StringVar(&a.keyFile, "admin-key-file", "", "file holding the admin key (default $BAE_ADMIN_KEY_FILE)")
	pf.BoolVar(&a.json, "json", false, "print JSON instead of tables")
	cmd.AddCommand(
		a.profilesCmd(),
		a.keysCmd(),
		a.sessionsCmd(),
		a.eventsCmd(),
		a.configCmd(),
		a.registryCmd("providers", "List the configured LLM providers", "/admin/v1/providers",
			"no providers configured", []string{"NAME", "PROVIDER", "MODEL", "BASE_URL"}, rowOf(providerRow)),
		a.registryCmd("mcp-servers", "List the configured MCP servers", "/admin/v1/mcp-servers",
			"no MCP servers configured", []string{"NAME", "TRANSPORT"}, rowOf(mcpRow)),
		a.sandboxStatusCmd(),
		a.environmentsCmd(),
		a.machinesCmd(),
		a.nodesCmd(),
	)
	return cmd
}

// client resolves the address and the token into an API client.
func (a *adminCLI) client() (*adminClient, error) {
	addr := a.addr
	if addr == "" {
		addr = strings.TrimSpace(a.c.getenv("BAE_ADMIN_ADDR"))
	}
	if addr == "" {
		addr = defaultAdminAddr
	}
	base, err := adminclient.NormalizeAddr(addr)
	if err != nil {
		return nil, usageErr(err)
	}
	cl := &adminClient{base: base}
	cl.token, cl.source, cl.note, err = a.resolveToken()
	if err != nil {
		return nil, err
	}
	if cl.api, err = adminclient.New(base, cl.token, nil); err != nil {
		return nil, usageErr(err)
	}
	return cl, nil
}

// adminClient is the admin API client of one `baton admin` command: its
// errors carry an exit code and say how to fix what the user can fix.
type adminClient struct {
	api    *adminclient.Client
	base   string // the normalized base URL
	token  string // "" when none was found
	source string // where token came from, for error messages
	note   string // why a default key file was skipped, for error messages
}

func (c *adminClient) get(ctx context.Context, path string, query url.Values, out any) error {
	return c.fail(c.api.Get(ctx, path, query, out))
}

func (c *adminClient) post(ctx context.Context, path string, in, out any) error {
	return c.fail(c.api.Post(ctx, path, in, out))
}

func (c *adminClient) put(ctx context.Context, path string, in, out any) error {
	return c.fail(c.api.Put(ctx, path, in, out))
}

func (c *adminClient) del(ctx context.Context, path string) error {
	return c.fail(c.api.Delete(ctx, path))
}

func (c *adminClient) page(ctx context.Context, path string, query url.Values) (*adminclient.Page, json.RawMessage, error) {
	p, raw, err := c.api.Page(ctx, path, query)
	return p, raw, c.fail(err)
}

func (c *adminClient) all(ctx context.Context, path string, query url.Values) ([]json.RawMessage, error) {
	items, err := c.api.All(ctx, path, query)
	return items, c.fail(err)
}

// apiError is the message of a non-2xx answer.
func (c *adminClient) apiError(status int, body []byte) error {
	return c.explain(adminclient.ResponseError(status, body, c.base))
}

// fail gives err its exit code: an address that makes no request is a
// usage error, anything else a runtime error.
func (c *adminClient) fail(err error) error {
	var ae *adminclient.AddrError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return usageErr(err)
	}
	return runtimeErr(c.explain(err))
}

// explain adds to an API error what the user can do about it.
func (c *adminClient) explain(err error) error {
	var ae *adminclient.APIError
	if !errors.As(err, &ae) {
		return err
	}
	detail := ae.Error()
	switch ae.Type {
	case baton.ECodeUnauthorized:
		return c.unauthorized(detail)
	case baton.ECodeProfileInUse:
		return fmt.Errorf("%s\nlist the keys bound to it with `baton admin keys list` and revoke them with `baton admin keys revoke <key_id>`", detail)
	case baton.ECodeProfileUnavailable:
		return fmt.Errorf("%s (the referenced profile does not exist or was deleted)", detail)
	}
	return errors.New(detail)
}

// unauthorized explains the ways to give an admin token.
func (c *adminClient) unauthorized(detail string) error {
	var b strings.Builder
	if c.token == "" {
		fmt.Fprintf(&b, "the admin API requires an admin key and none was found (%s)", detail)
	} else {
		fmt.Fprintf(&b, "the admin API rejected the admin key from %s (%s)", c.source, detail)
	}
	if c.note != "" {
		fmt.Fprintf(&b, "; %s", c.note)
	}
	b.WriteString("\ngive an admin key in one of three ways:\n" +
		"  1. --admin-token <key>\n" +
		"  2. the BAE_ADMIN_TOKEN environment variable\n" +
		"  3. a key file: --admin-key-file <path> or BAE_ADMIN_KEY_FILE (default " +
		devKeyFile + ", then " + defaultKeyFile + ")")
	return errors.New(b.String())
}

// resolveToken finds the admin key: --admin-token > BAE_ADMIN_TOKEN >
// --admin-key-file > BAE_ADMIN_KEY_FILE > the default files. A named key
// file that cannot be read is an error; a missing default file is skipped.
// It returns the token, where it came from, and a note on default files that
// exist but could not be read.
func (a *adminCLI) resolveToken() (token, source, note string, err error) {
	if t := strings.TrimSpace(a.token); t != "" {
		return t, "--admin-token", "", nil
	}
	if t := strings.TrimSpace(a.c.getenv("BAE_ADMIN_TOKEN")); t != "" {
		return t, "BAE_ADMIN_TOKEN", "", nil
	}
	for _, named := range []struct{ path, via string }{
		{a.keyFile, "--admin-key-file"},
		{a.c.getenv("BAE_ADMIN_KEY_FILE"), "BAE_ADMIN_KEY_FILE"},
	} {
		if named.path == "" {
			continue
		}
		b, err := os.ReadFile(named.path)
		if err != nil {
			return "", "", "", runtimeErr(fmt.Errorf("read admin key file (%s): %w", named.via, err))
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", "", "", runtimeErr(fmt.Errorf("admin key file %s (%s) is empty", named.path, named.via))
		}
		return t, named.path, "", nil
	}
	var notes []string
	for _, p := range a.probes {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("could not read %s: %v", p, errors.Unwrap(err)))
			continue
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, p, "", nil
		}
	}
	return "", "", strings.Join(notes, "; "), nil
}

// printJSON pretty-prints raw JSON to stdout.
func (a *adminCLI) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return runtimeErr(adminclient.ErrUnexpected)
	}
	buf.WriteByte('\n')
	_, err := a.c.stdout.Write(buf.Bytes())
	return err
}

// printItems prints a flat JSON array of items.
func (a *adminCLI) printItems(items []json.RawMessage) error {
	raw, err := json.Marshal(items)
	if err != nil {
		return runtimeErr(adminclient.ErrUnexpected)
	}
	return a.printJSON(raw)
}

// writeTable prints aligned columns under a header (none when nil).
func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// rowOf adapts a typed row function to raw items; an item that does not
// decode is an unexpected response.
func rowOf[T any](f func(*T) []string) func(json.RawMessage) ([]string, error) {
	return func(raw json.RawMessage) ([]string, error) {
		v := new(T)
		if err := json.Unmarshal(raw, v); err != nil {
			return nil, runtimeErr(adminclient.ErrUnexpected)
		}
		return f(v), nil
	}
}

// printRows prints items as a table, or empty when there are none.
func (a *adminCLI) printRows(items []json.RawMessage, empty string, header []string, row func(json.RawMessage) ([]string, error)) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(a.c.stdout, empty)
		return err
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		r, err := row(it)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	return writeTable(a.c.stdout, header, rows)
}

// dash shows an absent value.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// deref shows an optional value, or alt when it is null.
func deref(s *string, alt string) string {
	if s == nil || *s == "" {
		return alt
	}
	return *s
}

// pageFlags are --limit and --cursor of a list command.
type pageFlags struct {
	limit  int
	cursor string
}

func (p *pageFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&p.limit, "limit", 0, "fetch one page of at most this many items (default: every page)")
	cmd.Flags().StringVar(&p.cursor, "cursor", "", "fetch the one page after this cursor (from next_cursor)")
}

// listSpec describes a paginated list command's output.
type listSpec struct {
	path   string
	query  url.Values
	empty  string
	header []string
	row    func(json.RawMessage) ([]string, error)
	// walk, when set, is the page size for fetching every page: smaller
	// than the server's default for items that can be large.
	walk int
}

// list runs a paginated list: every page by default, one page when --limit
// or --cursor is given.
func (a *adminCLI) list(cmd *cobra.Command, pf *pageFlags, s listSpec) error {
	cl, err := a.client()
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range s.query {
		q[k] = v
	}
	ctx := cmd.Context()
	one := cmd.Flags().Changed("limit") || cmd.Flags().Changed("cursor")
	if !one {
		if s.walk > 0 {
			q.Set("limit", strconv.Itoa(s.walk))
		}
		items, err := cl.all(ctx, s.path, q)
		if err != nil {
			return err
		}
		if a.json {
			return a.printItems(items)
		}
		return a.printRows(items, s.empty, s.header, s.row)
	}
	if cmd.Flags().Changed("limit") {
		if pf.limit < 1 {
			return usageErr(fmt.Errorf("--limit must be a positive integer, got %d", pf.limit))
		}
		q.Set("limit", strconv.Itoa(pf.limit))
	}
	if pf.cursor != "" {
		q.Set("cursor", pf.cursor)
	}
	p, raw, err := cl.page(ctx, s.path, q)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(raw)
	}
	if err := a.printRows(p.Items, s.empty, s.header, s.row); err != nil {
		return err
	}
	if next := p.Next(); next != "" {
		_, err = fmt.Fprintf(a.c.stdout, "more results: --cursor %s\n", next)
	}
	return err
}

type sessionView struct {
	ID        string  `json:"id"`
	ProfileID string  `json:"profile_id"`
	State     string  `json:"state"`
	CreatedAt string  `json:"created_at"`
	ClosedAt  *string `json:"closed_at"`
	Owner     string  `json:"owner_node_id"` // in a cluster
}

func sessionRow(s *sessionView) []string {
	return []string{s.ID, dash(s.ProfileID), s.State, s.CreatedAt, deref(s.ClosedAt, "-"), dash(s.Owner)}
}

func (a *adminCLI) sessionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Inspect sessions",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var pf pageFlags
	var state string
	list := &cobra.Command{
		Use:   "list",
		Short: "List sessions, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			switch state {
			case "":
			case "open", "closed", "error":
				q.Set("state", state)
			default:
				return usageErr(fmt.Errorf("invalid --state %q; expected one of open, closed, error", state))
			}
			return a.list(cmd, &pf, listSpec{
				path: "/admin/v1/sessions", query: q, empty: "no sessions found",
				header: []string{"ID", "PROFILE_ID", "STATE", "CREATED_AT", "CLOSED_AT", "OWNER"},
				row:    rowOf(sessionRow),
			})
		},
	}
	pf.register(list)
	list.Flags().StringVar(&state, "state", "", "only sessions in this state: open, closed or error")
	cmd.AddCommand(list)
	return cmd
}

type eventView struct {
	ID          string  `json:"id"`
	EventType   string  `json:"event_type"`
	ClientKeyID *string `json:"client_key_id"`
	CreatedAt   string  `json:"created_at"`
}

func eventRow(e *eventView) []string {
	return []string{e.ID, e.EventType, deref(e.ClientKeyID, "-"), e.CreatedAt}
}

func (a *adminCLI) eventsCmd() *cobra.Command {
	var pf pageFlags
	cmd := &cobra.Command{
		Use:   "events <session_id>",
		Short: "List a session's events, oldest first (use --json for payloads)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.list(cmd, &pf, listSpec{
				path:   "/admin/v1/sessions/" + url.PathEscape(args[0]) + "/events",
				empty:  "no events found",
				header: []string{"ID", "EVENT_TYPE", "CLIENT_KEY_ID", "CREATED_AT"},
				row:    rowOf(eventRow),
				walk:   20, // provider.request events carry whole conversations
			})
		},
	}
	pf.register(cmd)
	return cmd
}

func (a *adminCLI) configCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Print the server's configuration snapshot as JSON (secrets redacted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := cl.get(cmd.Context(), "/admin/v1/config", nil, &raw); err != nil {
				return err
			}
			return a.printJSON(raw)
		},
	}
}

// itemsBody is the {"items":[…]} body of the unpaginated registry routes.
type itemsBody struct {
	Items []json.RawMessage `json:"items"`
}

// items fetches an unpaginated {"items":[…]} route.
func (a *adminCLI) items(cmd *cobra.Command, path string) ([]json.RawMessage, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	var b itemsBody
	if err := cl.get(cmd.Context(), path, nil, &b); err != nil {
		return nil, err
	}
	if b.Items == nil {
		return nil, runtimeErr(adminclient.ErrUnexpected)
	}
	return b.Items, nil
}

func (a *adminCLI) registryCmd(use, short, path, empty string, header []string, row func(json.RawMessage) ([]string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			items, err := a.items(cmd, path)
			if err != nil {
				return err
			}
			if a.json {
				return a.printItems(items)
			}
			return a.printRows(items, empty, header, row)
		},
	}
}

type providerView struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	BaseURL  string `json:"base_url"`
}

func providerRow(p *providerView) []string {
	return []string{p.Name, p.Provider, p.Model, dash(p.BaseURL)}
}

type mcpView struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
}

func mcpRow(m *mcpView) []string { return []string{m.Name, m.Transport} }

type sandboxStatusView struct {
	ProfileID string `json:"profile_id"`
	Images    []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Detail string `json:"detail"`
	} `json:"images"`
}

func (a *adminCLI) sandboxStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sandbox-status",
		Short: "Show the provisioning status of each profile's sandbox images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			items, err := a.items(cmd, "/admin/v1/sandbox-status")
			if err != nil {
				return err
			}
			if a.json {
				return a.printItems(items)
			}
			if len(items) == 0 {
				_, err := fmt.Fprintln(a.c.stdout, "no sandbox status recorded")
				return err
			}
			var rows [][]string
			for _, raw := range items {
				var s sandboxStatusView
				if err := json.Unmarshal(raw, &s); err != nil {
					return runtimeErr(adminclient.ErrUnexpected)
				}
				if len(s.Images) == 0 {
					rows = append(rows, []string{s.ProfileID, "-", "-", "-"})
				}
				for _, im := range s.Images {
					rows = append(rows, []string{s.ProfileID, im.Name, im.Status, dash(im.Detail)})
				}
			}
			return writeTable(a.c.stdout, []string{"PROFILE_ID", "IMAGE", "STATUS", "DETAIL"}, rows)
		},
	}
}
