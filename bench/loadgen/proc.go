package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux fixes
// USER_HZ at 100 on every architecture Go supports.
const userHZ = 100

// usage is a sample of a process's resource use.
type usage struct {
	User, System time.Duration // CPU time, all threads
	RSS, PeakRSS int64         // bytes: VmRSS and VmHWM
}

// CPU is user plus system time.
func (u usage) CPU() time.Duration { return u.User + u.System }

// sample reads /proc/<pid>/stat and /proc/<pid>/status under root
// ("/proc" outside tests).
func sample(root string, pid int) (usage, error) {
	var u usage
	stat, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return u, err
	}
	if u.User, u.System, err = parseStat(string(stat)); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	f, err := os.Open(filepath.Join(root, strconv.Itoa(pid), "status"))
	if err != nil {
		return u, err
	}
	defer f.Close()
	u.RSS, u.PeakRSS, err = parseStatus(f)
	if err != nil {
		return u, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return u, nil
}

// parseStat returns utime and stime (fields 14 and 15) of a stat line. The
// command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStat(s string) (user, system time.Duration, err error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("no command field")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, errors.New("too few fields")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	tick := time.Second / userHZ
	return time.Duration(ut) * tick, time.Duration(st) * tick, nil
}

// parseStatus returns VmRSS and VmHWM in bytes.
func parseStatus(r io.Reader) (rss, peak int64, err error) {
	sc := bufio.NewScanner(r)
	found := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			peak = n << 10
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found < 2 {
		return 0, 0, errors.New("VmRSS or VmHWM missing")
	}
	return rss, peak, nil
}

// urlPort returns the TCP port of a base URL (80 or 443 when implicit).
func urlPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, err
	}
	p := u.Port()
	if p == "" {
		switch u.Scheme {
		case "http":
			return 80, nil
		case "https":
			return 443, nil
		}
		return 0, fmt.Errorf("%q has no port", raw)
	}
	return strconv.Atoi(p)
}

// findListener returns the pid of the process holding a listening TCP
// socket on port: the socket's inode comes from /proc/net/tcp and tcp6,
// the owner from the symlinks under /proc/<pid>/fd. Processes of other
// users are unreadable and skipped, so the server must run as the same
// user (or pass -server-pid).
func findListener(root string, port int) (int, error) {
	inodes := map[string]bool{}
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			continue
		}
		err = listeningInodes(f, port, inodes)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("/proc/%s: %w", name, err)
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no listening socket on port %d", port)
	}
	dirs, err := os.ReadDir(root)
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(root, d.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(root, d.Name(), "fd", fd.Name()))
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("port %d is listening but its process is not readable (another user?); pass -server-pid", port)
}

// listeningInodes adds the inodes of sockets in state LISTEN (0A) on port
// from a /proc/net/tcp table.
func listeningInodes(r io.Reader, port int, into map[string]bool) error {
	sc := bufio.NewScanner(r)
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			continue
		}
		if int(p) == port {
			into[f[9]] = true
		}
	}
	return sc.Err()
}
