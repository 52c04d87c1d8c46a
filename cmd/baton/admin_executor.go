package main

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton/adminapi/adminclient"
)

// ownerCLIView is an environment or machine as the admin API returns it.
type ownerCLIView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

func ownerRow(o *ownerCLIView) []string { return []string{o.ID, o.Name, o.CreatedAt} }

// credentialCLIView is a credential as the admin API lists it.
type credentialCLIView struct {
	ID        string  `json:"id"`
	Prefix    string  `json:"prefix"`
	Scope     string  `json:"scope"`
	OwnerID   string  `json:"owner_id"`
	CreatedAt string  `json:"created_at"`
	RevokedAt *string `json:"revoked_at"`
}

func credentialRow(c *credentialCLIView) []string {
	return []string{c.ID, c.Prefix, c.CreatedAt, deref(c.RevokedAt, "-")}
}

// credentialCLICreated is the 201 body of POST …/credentials, the only
// place the secret appears.
type credentialCLICreated struct {
	ID      string `json:"id"`
	Secret  string `json:"secret"`
	Prefix  string `json:"prefix"`
	Scope   string `json:"scope"`
	OwnerID string `json:"owner_id"`
}

// ownerCmd is `baton admin environments` or `baton admin machines`: the
// two have the same commands on their own routes.
type ownerCmd struct {
	a      *adminCLI
	path   string // "environments" or "machines"
	noun   string // "environment" or "machine"
	plural string
}

func (a *adminCLI) environmentsCmd() *cobra.Command {
	o := &ownerCmd{a: a, path: "environments", noun: "environment", plural: "environments"}
	return o.command("Manage executor environments (pools of tool executors)", "env")
}

func (a *adminCLI) machinesCmd() *cobra.Command {
	o := &ownerCmd{a: a, path: "machines", noun: "machine", plural: "machines"}
	return o.command("Manage executor machines (hosts serving a shell or a brain)")
}

func (o *ownerCmd) command(short string, aliases ...string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     o.path,
		Aliases: append([]string{o.noun}, aliases...),
		Short:   short,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(o.createCmd(), o.listCmd(), o.getCmd(), o.deleteCmd(), o.credentialsCmd())
	return cmd
}

// base is the owner's collection path, or one owner's path with id.
func (o *ownerCmd) base(id ...string) string {
	p := "/admin/v1/" + o.path
	for _, s := range id {
		p += "/" + url.PathEscape(s)
	}
	return p
}

func (o *ownerCmd) createCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create <name>",
		Short: "Create " + article(o.noun),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.a.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := cl.post(cmd.Context(), o.base(), map[string]string{"name": args[0]}, &raw); err != nil {
				return err
			}
			var v ownerCLIView
			if json.Unmarshal(raw, &v) != nil || v.ID == "" {
				return runtimeErr(adminclient.ErrUnexpected)
			}
			if o.a.json {
				return o.a.printJSON(raw)
			}
			_, err = fmt.Fprintf(o.a.c.stdout, "created %s %s (%s)\n", o.noun, v.ID, v.Name)
			return err
		},
	}
}

func (o *ownerCmd) listCmd() *cobra.Command {
	var pf pageFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List " + o.plural,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.a.list(cmd, &pf, listSpec{
				path: o.base(), empty: "no " + o.plural + " found",
				header: []string{"ID", "NAME", "CREATED_AT"},
				row:    rowOf(ownerRow),
			})
		},
	}
	pf.register(cmd)
	return cmd
}

func (o *ownerCmd) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get <id>",
		Short: "Show one " + o.noun,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.a.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := cl.get(cmd.Context(), o.base(args[0]), nil, &raw); err != nil {
				return err
			}
			var v ownerCLIView
			if json.Unmarshal(raw, &v) != nil || v.ID == "" {
				return runtimeErr(adminclient.ErrUnexpected)
			}
			if o.a.json {
				return o.a.printJSON(raw)
			}
			return writeTable(o.a.c.stdout, nil, [][]string{{"ID:", v.ID}, {"NAME:", v.Name}, {"CREATED_AT:", v.CreatedAt}})
		},
	}
}

func (o *ownerCmd) deleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete <id>",
		Short: "Delete " + article(o.noun) + " and revoke its credentials",
		Long: `Delete ` + article(o.noun) + `. Its credentials are revoked and their executors
disconnected. The server refuses while a profile still refers to it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.a.client()
			if err != nil {
				return err
			}
			if err := cl.del(cmd.Context(), o.base(args[0])); err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.a.c.stdout, "deleted %s %s\n", o.noun, args[0])
			return err
		},
	}
}

func (o *ownerCmd) credentialsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "credentials",
		Aliases: []string{"credential", "creds"},
		Short:   "Manage the credentials executors of " + article(o.noun) + " connect with",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(o.credentialCreateCmd(), o.credentialListCmd(), o.credentialRevokeCmd())
	return cmd
}

func (o *ownerCmd) credentialCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create <" + o.noun + "_id>",
		Short: "Create a credential and print its secret once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.a.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := cl.post(cmd.Context(), o.base(args[0], "credentials"), nil, &raw); err != nil {
				return err
			}
			var c credentialCLICreated
			if json.Unmarshal(raw, &c) != nil || c.ID == "" || c.Secret == "" {
				return runtimeErr(adminclient.ErrUnexpected)
			}
			if o.a.json {
				err = o.a.printJSON(raw)
			} else {
				err = writeTable(o.a.c.stdout, nil, [][]string{
					{"ID:", c.ID},
					{"SCOPE:", c.Scope},
					{"OWNER_ID:", c.OwnerID},
					{"PREFIX:", c.Prefix},
					{"SECRET:", c.Secret},
				})
			}
			fmt.Fprintln(o.a.c.stderr, "baton: copy the secret now — it cannot be retrieved again")
			return err
		},
	}
}

func (o *ownerCmd) credentialListCmd() *cobra.Command {
	var pf pageFlags
	cmd := &cobra.Command{
		Use:   "list <" + o.noun + "_id>",
		Short: "List the " + o.noun + "'s credentials, revoked ones included",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.a.list(cmd, &pf, listSpec{
				path: o.base(args[0], "credentials"), empty: "no credentials found",
				header: []string{"ID", "PREFIX", "CREATED_AT", "REVOKED_AT"},
				row:    rowOf(credentialRow),
			})
		},
	}
	pf.register(cmd)
	return cmd
}

func (o *ownerCmd) credentialRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "revoke <" + o.noun + "_id> <credential_id>",
		Aliases: []string{"delete"},
		Short:   "Revoke a credential: its tokens stop working and its executors are disconnected",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.a.client()
			if err != nil {
				return err
			}
			if err := cl.del(cmd.Context(), o.base(args[0], "credentials", args[1])); err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.a.c.stdout, "revoked credential %s\n", args[1])
			return err
		},
	}
}

// article prefixes noun with "a" or "an".
func article(noun string) string {
	if noun != "" && (noun[0] == 'a' || noun[0] == 'e' || noun[0] == 'i' || noun[0] == 'o' || noun[0] == 'u') {
		return "an " + noun
	}
	return "a " + noun
}
