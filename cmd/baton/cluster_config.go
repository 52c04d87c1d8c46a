package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/baton-engine/baton/cluster"
)

// clusterConfig is how this process joins a cluster of nodes sharing one
// PostgreSQL database (docs/cluster.md). Cluster mode is on whenever the
// store is PostgreSQL; SQLite is always a single node.
type clusterConfig struct {
	NodeID       string        // BATON_NODE_ID; by default <hostname>-<random>, new at every start
	AdvertiseURL string        // BATON_ADVERTISE_URL; by default the client listener's URL
	LeaseTTL     time.Duration // BATON_LEASE_TTL; cluster.DefaultLeaseTTL
}

// minLeaseTTL keeps renewals (every TTL/3) from swamping the database.
const minLeaseTTL = 300 * time.Millisecond

func loadClusterConfig(getenv func(string) string) (clusterConfig, error) {
	c := clusterConfig{LeaseTTL: cluster.DefaultLeaseTTL}
	var errs []string
	if v := strings.TrimSpace(getenv("BATON_NODE_ID")); v != "" {
		if len(v) > 200 || strings.ContainsAny(v, " \t\r\n") {
			errs = append(errs, fmt.Sprintf("BATON_NODE_ID: %q must be 1-200 bytes without spaces", v))
		}
		c.NodeID = v
	}
	if v := strings.TrimSpace(getenv("BATON_ADVERTISE_URL")); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			errs = append(errs, fmt.Sprintf("BATON_ADVERTISE_URL: %q: want this node's client origin as the other nodes reach it, http(s)://host[:port]", v))
		}
		c.AdvertiseURL = strings.TrimSuffix(v, "/")
	}
	if v := strings.TrimSpace(getenv("BATON_LEASE_TTL")); v != "" {
		d, err := parseSecondsOrDuration(v)
		if err != nil || d < minLeaseTTL {
			errs = append(errs, fmt.Sprintf("BATON_LEASE_TTL: %q: want whole seconds or a duration such as 1500ms, at least %v", v, minLeaseTTL))
		}
		c.LeaseTTL = d
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return c, nil
}

// parseSecondsOrDuration reads "5" as five seconds and "1500ms" as a Go
// duration.
func parseSecondsOrDuration(v string) (time.Duration, error) {
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

// nodeID is BATON_NODE_ID or a fresh <hostname>-<8 hex> id. A restarted
// process is a new node: the leases of its previous run are taken over
// like any stopped node's.
func (c clusterConfig) nodeID() string {
	if c.NodeID != "" {
		return c.NodeID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "baton"
	}
	host = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' {
			return '-'
		}
		return r
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}
