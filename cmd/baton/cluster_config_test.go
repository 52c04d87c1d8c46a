package main

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestLoadClusterConfig(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    clusterConfig
		wantErr string
	}{
		{env: nil, want: clusterConfig{LeaseTTL: 5 * time.Second}},
		{env: map[string]string{"BATON_LEASE_TTL": "2"}, want: clusterConfig{LeaseTTL: 2 * time.Second}},
		{env: map[string]string{"BATON_LEASE_TTL": "1500ms", "BATON_NODE_ID": "n1", "BATON_ADVERTISE_URL": "http://10.0.0.7:8080/"},
			want: clusterConfig{LeaseTTL: 1500 * time.Millisecond, NodeID: "n1", AdvertiseURL: "http://10.0.0.7:8080"}},
		{env: map[string]string{"BATON_LEASE_TTL": "100ms"}, wantErr: "at least 300ms"},
		{env: map[string]string{"BATON_LEASE_TTL": "soon"}, wantErr: "BATON_LEASE_TTL"},
		{env: map[string]string{"BATON_ADVERTISE_URL": "10.0.0.7:8080"}, wantErr: "BATON_ADVERTISE_URL"},
		{env: map[string]string{"BATON_ADVERTISE_URL": "http://h:1/base"}, wantErr: "BATON_ADVERTISE_URL"},
		{env: map[string]string{"BATON_NODE_ID": "has space"}, wantErr: "BATON_NODE_ID"},
	}
	for _, tc := range tests {
		got, err := loadClusterConfig(envFunc(tc.env))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want one mentioning %q", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
}

func TestNodeIDIsFreshEachStart(t *testing.T) {
	var c clusterConfig
	a, b := c.nodeID(), c.nodeID()
	if a == b || strings.ContainsAny(a, " \t") || len(a) > 200 {
		t.Errorf("node ids %q and %q: want two different ids without spaces", a, b)
	}
	if got := (clusterConfig{NodeID: "fixed"}).nodeID(); got != "fixed" {
		t.Errorf("BATON_NODE_ID ignored: %q", got)
	}
}

func TestAdvertiseURL(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	host := func(addrs ...net.Addr) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) { return addrs, nil }
	}
	tests := []struct {
		name, set, listen string
		addrs             func() ([]net.Addr, error)
		want              string
		noted             bool
	}{
		{"set wins", "http://node-a:8080", "http://0.0.0.0:8080", host(), "http://node-a:8080", false},
		{"loopback listener", "", "http://127.0.0.1:4000", host(), "http://127.0.0.1:4000", false},
		{"specific address", "", "http://10.1.2.3:4000", host(), "http://10.1.2.3:4000", false},
		{"any address: first private IPv4", "", "http://0.0.0.0:8080",
			host(cidr("127.0.0.1/8"), cidr("fe80::1/64"), cidr("fd00::5/64"), cidr("10.0.0.9/24")), "http://10.0.0.9:8080", true},
		{"any address: IPv6 only", "", "http://[::]:8080", host(cidr("::1/128"), cidr("fd00::5/64")), "http://[fd00::5]:8080", true},
		{"any address: nothing else", "", "http://0.0.0.0:8080", host(cidr("127.0.0.1/8")), "http://0.0.0.0:8080", true},
		{"any address: listing fails", "", "http://0.0.0.0:8080", func() ([]net.Addr, error) { return nil, errors.New("no") }, "http://0.0.0.0:8080", true},
	}
	for _, tc := range tests {
		got, note := clusterConfig{AdvertiseURL: tc.set}.advertiseURL(tc.listen, tc.addrs)
		if got != tc.want || (note != "") != tc.noted {
			t.Errorf("%s: %q (note %q), want %q (noted %v)", tc.name, got, note, tc.want, tc.noted)
		}
	}
}
