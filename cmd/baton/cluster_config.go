package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
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

// advertiseURL is where the other nodes reach this one: BATON_ADVERTISE_URL,
// else the client listener's URL. A listener on every address (0.0.0.0 or
// [::]) is advertised at the first non-loopback address of the host's
// interfaces, which note reports so that the operator can check it.
func (c clusterConfig) advertiseURL(listenURL string, addrs func() ([]net.Addr, error)) (u string, note string) {
	if c.AdvertiseURL != "" {
		return c.AdvertiseURL, ""
	}
	parsed, err := url.Parse(listenURL)
	if err != nil {
		return listenURL, ""
	}
	ip, err := netip.ParseAddr(parsed.Hostname())
	if err != nil || !ip.IsUnspecified() {
		return listenURL, ""
	}
	list, err := addrs()
	if err != nil {
		return listenURL, fmt.Sprintf("cannot list the host's addresses (%v); set BATON_ADVERTISE_URL", err)
	}
	var pick netip.Addr
	for _, a := range list {
		p, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(p.IP)
		if !ok || ip.IsLoopback() || ip.IsLinkLocalUnicast() || !ip.IsGlobalUnicast() && !ip.IsPrivate() {
			continue
		}
		ip = ip.Unmap()
		if !pick.IsValid() || pick.Is6() && ip.Is4() {
			pick = ip
		}
	}
	if !pick.IsValid() {
		return listenURL, "the client port listens on every address and the host has no other; set BATON_ADVERTISE_URL"
	}
	parsed.Host = netip.AddrPortFrom(pick, portOf(parsed)).String()
	return parsed.String(), "BATON_ADVERTISE_URL is unset and the client port listens on every address: advertising " + parsed.String()
}

func portOf(u *url.URL) uint16 {
	p, _ := strconv.ParseUint(u.Port(), 10, 16)
	return uint16(p)
}
