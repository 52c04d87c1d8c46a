package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton/adminapi/adminclient"
)

// keyBody is the POST body of /admin/v1/keys. Scopes is a Baton extension,
// left out when not given (the server then applies its default).
type keyBody struct {
	Name      string   `json:"name"`
	ProfileID string   `json:"profile_id"`
	Scopes    []string `json:"scopes,omitempty"`
}

// keyCreated is the 201 body of POST /admin/v1/keys, the only place the
// plaintext key appears.
type keyCreated struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Key       string   `json:"key"`
	Prefix    string   `json:"prefix"`
	ProfileID string   `json:"profile_id"`
	Scopes    []string `json:"scopes"`
	CreatedAt string   `json:"created_at"`
}

// keyView is a client key as GET /admin/v1/keys lists it.
type keyView struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Prefix     string  `json:"prefix"`
	ProfileID  string  `json:"profile_id"`
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"`
}

func keyRow(k *keyView) []string {
	return []string{k.ID, k.Name, k.Prefix, k.ProfileID, deref(k.LastUsedAt, "never")}
}

func (a *adminCLI) keysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "keys",
		Aliases: []string{"key"},
		Short:   "Manage client keys",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.keyCreateCmd(), a.keyListCmd(), a.keyRevokeCmd())
	return cmd
}

func (a *adminCLI) keyCreateCmd() *cobra.Command {
	var scopes []string
	cmd := &cobra.Command{
		Use:   "create <name> <profile_id>",
		Short: "Create a client key bound to a profile and print it once",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			b := keyBody{Name: args[0], ProfileID: args[1], Scopes: nonEmpty(scopes)}
			var raw json.RawMessage
			if err := cl.post(cmd.Context(), "/admin/v1/keys", &b, &raw); err != nil {
				return err
			}
			var k keyCreated
			if json.Unmarshal(raw, &k) != nil || k.ID == "" || k.Key == "" {
				return runtimeErr(adminclient.ErrUnexpected)
			}
			if a.json {
				err = a.printJSON(raw)
			} else {
				rows := [][]string{
					{"ID:", k.ID},
					{"NAME:", k.Name},
					{"PROFILE_ID:", k.ProfileID},
					{"PREFIX:", k.Prefix},
				}
				if len(k.Scopes) > 0 {
					rows = append(rows, []string{"SCOPES:", strings.Join(k.Scopes, ", ")})
				}
				rows = append(rows, []string{"KEY:", k.Key})
				err = writeTable(a.c.stdout, nil, rows)
			}
			fmt.Fprintln(a.c.stderr, "baton: copy the key now — it cannot be retrieved again")
			return err
		},
	}
	cmd.Flags().StringArrayVar(&scopes, "scope", nil, "scope the key carries (repeatable; default: the server's default scopes)")
	return cmd
}

func (a *adminCLI) keyListCmd() *cobra.Command {
	var pf pageFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List active client keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &pf, listSpec{
				path: "/admin/v1/keys", empty: "no keys found",
				header: []string{"ID", "NAME", "PREFIX", "PROFILE_ID", "LAST_USED"},
				row:    rowOf(keyRow),
			})
		},
	}
	pf.register(cmd)
	return cmd
}

func (a *adminCLI) keyRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "revoke <id>",
		Aliases: []string{"delete"},
		Short:   "Revoke a client key and the session keys minted for it",
		Long: `Revoke a client key. Every session key minted for it stops working, and
open sessions left without an active participant are closed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			if err := cl.del(cmd.Context(), "/admin/v1/keys/"+url.PathEscape(args[0])); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.c.stdout, "revoked key %s\n", args[0])
			return err
		},
	}
}
