package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton/adminapi/adminclient"
)

// singleNode is what `baton admin nodes` says of a server that is not
// part of a cluster.
const singleNode = "this Baton is a single node (SQLite; on PostgreSQL every Baton is a cluster, of one node or more)"

func (c *adminClient) nodes(ctx context.Context) (*adminclient.NodeList, json.RawMessage, error) {
	l, raw, err := c.api.Nodes(ctx)
	return l, raw, c.fail(err)
}

func (a *adminCLI) nodesCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node"},
		Short:   "List the nodes of a cluster, oldest first",
		Long: `List the Baton nodes sharing this server's PostgreSQL database, oldest
first: each node's advertised client URL, version, live session leases,
the age of its last heartbeat (by the database's clock) and whether it is
draining. A server on SQLite is a single node and lists none; on
PostgreSQL every Baton is a cluster, of one node or more.

--json prints the server's answer: {"cluster": bool, "nodes": [...]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			l, raw, err := cl.nodes(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			switch {
			case !l.Cluster:
				_, err = fmt.Fprintln(a.c.stdout, singleNode)
				return err
			case len(l.Nodes) == 0:
				_, err = fmt.Fprintln(a.c.stdout, "no nodes registered")
				return err
			}
			rows := make([][]string, len(l.Nodes))
			for i := range l.Nodes {
				rows[i] = nodeRow(&l.Nodes[i])
			}
			return writeTable(a.c.stdout, []string{"ID", "ADDRESS", "VERSION", "SESSIONS", "HEARTBEAT", "DRAINING"}, rows)
		},
	}
}

func nodeRow(n *adminclient.Node) []string {
	draining := "no"
	if n.Draining {
		draining = "yes"
	}
	return []string{n.ID, dash(n.AdvertiseURL), dash(n.Version), strconv.Itoa(n.Sessions), ago(n.HeartbeatAge()), draining}
}

// ago shows an age as "1.2s ago": tenths of a second under a minute,
// seconds under an hour, minutes beyond.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	return d.String() + " ago"
}
