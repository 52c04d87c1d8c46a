package main

import (
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// The command name holds spaces and a ')' so fields must be counted
	// from the last one; utime=250 and stime=75 ticks.
	line := "4242 (baton (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 9 0 100 1000000 2000 18446744073709551615\n"
	u, s, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if u != 2500*time.Millisecond || s != 750*time.Millisecond {
		t.Fatalf("user %v system %v, want 2.5s 750ms", u, s)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 eleven 12"} {
		if _, _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	in := "Name:\tbaton\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t9\n"
	rss, peak, err := parseStatus(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if rss != 1<<20 || peak != 2<<20 {
		t.Fatalf("rss %d peak %d", rss, peak)
	}
	if _, _, err := parseStatus(strings.NewReader("VmRSS:\t1 kB\n")); err == nil {
		t.Fatal("missing VmHWM accepted")
	}
}

func TestListeningInodes(t *testing.T) {
	// Port 0x4696 = 18070: one listener (0A), one established (01) that
	// must be ignored, one listener on another port.
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4696 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:4696 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:4697 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 100 0 0 10 0
`
	got := map[string]bool{}
	if err := listeningInodes(strings.NewReader(table), 18070, got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got["111"] {
		t.Fatalf("inodes %v, want only 111", got)
	}
}

func TestFindListenerAndSampleSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	pid, err := findListener("/proc", port)
	if err != nil {
		t.Fatal(err)
	}
	if pid != os.Getpid() {
		t.Fatalf("pid %d, want this process %d", pid, os.Getpid())
	}
	u, err := sample("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.PeakRSS < u.RSS {
		t.Fatalf("implausible memory sample %+v", u)
	}
	ln.Close()
	if _, err := findListener("/proc", port); err == nil {
		t.Fatal("found a listener on a closed port")
	}
}

func TestURLPort(t *testing.T) {
	for in, want := range map[string]int{
		"http://127.0.0.1:18080": 18080, "http://localhost": 80, "https://h/x": 443,
	} {
		if got, err := urlPort(in); err != nil || got != want {
			t.Errorf("urlPort(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := urlPort("ftp://h"); err == nil {
		t.Error("ftp without port accepted")
	}
}
