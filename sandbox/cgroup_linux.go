//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupMount is where the cgroup hierarchies are mounted.
const cgroupMount = "/sys/fs/cgroup"

// hierarchy is one cgroup hierarchy the driver uses: dir is the driver's
// parent cgroup in it (<own cgroup>/baton-<instance>), under which each
// sandbox gets a cgroup named by its id.
type hierarchy struct {
	dir    string
	v2     bool
	pids   bool // the pids controller is usable here
	memory bool // the memory controller is usable here
}

// cgroups is the set of hierarchies the driver places sandboxes in: the
// unified hierarchy (cgroup v2), or the hierarchies of the pids and memory
// controllers (cgroup v1). It is empty where none is mounted.
type cgroups []hierarchy

// detectCgroups finds the hierarchies for this process: cgroup v2 when
// /sys/fs/cgroup is unified, else the v1 hierarchies of pids and memory.
// The driver's parent cgroups sit under this process's own cgroups, so a
// server confined to a cgroup keeps its sandboxes inside it.
func detectCgroups(instance string) (cgroups, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	name := "baton-" + instance
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupMount, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		path := own[""]
		ctrl, _ := os.ReadFile(filepath.Join(cgroupMount, path, "cgroup.controllers"))
		fields := strings.Fields(string(ctrl))
		return cgroups{{
			dir: filepath.Join(cgroupMount, path, name), v2: true,
			pids: contains(fields, "pids"), memory: contains(fields, "memory"),
		}}, nil
	}
	mounts, err := v1Mounts()
	if err != nil {
		return nil, err
	}
	var out cgroups
	for _, ctrl := range []string{"pids", "memory"} {
		m, ok := mounts[ctrl]
		if !ok {
			continue
		}
		rel, ok := strings.CutPrefix(own[ctrl], m.root)
		if !ok {
			rel = "/" // our cgroup is outside the mounted subtree
		}
		dir := filepath.Join(m.point, rel, name)
		if i := out.index(dir); i >= 0 { // co-mounted controllers
			out[i].pids = out[i].pids || ctrl == "pids"
			out[i].memory = out[i].memory || ctrl == "memory"
			continue
		}
		out = append(out, hierarchy{dir: dir, pids: ctrl == "pids", memory: ctrl == "memory"})
	}
	return out, nil
}

func (cs cgroups) index(dir string) int {
	for i, h := range cs {
		if h.dir == dir {
			return i
		}
	}
	return -1
}

func (cs cgroups) has(ctrl string) bool {
	for _, h := range cs {
		if (ctrl == "pids" && h.pids) || (ctrl == "memory" && h.memory) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ownCgroups maps each v1 controller of this process to its cgroup path,
// and "" to its v2 (unified) path, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

type mount struct{ point, root string }

// v1Mounts maps each cgroup v1 controller to where its hierarchy is
// mounted, from /proc/self/mountinfo.
func v1Mounts() (map[string]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]mount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional…] - type source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 || tail[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(tail[2], ",") {
			if _, seen := out[opt]; !seen {
				out[opt] = mount{point: fields[4], root: fields[3]}
			}
		}
	}
	return out, sc.Err()
}

// prepare creates the driver's parent cgroups and, on cgroup v2, enables
// the pids and memory controllers for the sandboxes' cgroups. It returns
// the hierarchies it could use: one it cannot create is left out, a
// controller it cannot enable is dropped (the limit then falls back to an
// rlimit); the error says why.
func (cs cgroups) prepare() (cgroups, error) {
	var errs []error
	var out cgroups
	for _, h := range cs {
		if err := os.MkdirAll(h.dir, 0o755); err != nil {
			errs = append(errs, fmt.Errorf("create cgroup %s: %w", h.dir, err))
			continue
		}
		if h.v2 && (h.pids || h.memory) {
			var want []string
			if h.pids {
				want = append(want, "+pids")
			}
			if h.memory {
				want = append(want, "+memory")
			}
			ctl := strings.Join(want, " ")
			// The own cgroup must delegate the controllers to ours, and
			// ours to the sandboxes'. A non-root cgroup holding processes
			// cannot (cgroup v2's no-internal-process rule): that fails
			// here.
			for _, d := range []string{filepath.Dir(h.dir), h.dir} {
				if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(ctl), 0); err != nil {
					errs = append(errs, fmt.Errorf("enable %s in %s: %w", ctl, d, err))
					h.pids, h.memory = false, false
					break
				}
			}
		}
		out = append(out, h)
	}
	return out, errors.Join(errs...)
}

// cgroup is one sandbox's cgroup: a directory <id> in each hierarchy,
// which carries the memory limit. Where the pids controller is, <id> has
// two children: jail, for the jail process, and cmd, for the commands,
// which carries the pids limit — a jail whose own threads counted against
// that limit would die when its commands exhaust it. Commands are born in
// cmd: on cgroup v2 through CLONE_INTO_CGROUP, on v1 because the jail's
// thread that starts them has moved itself there (v1 places threads one
// by one).
type cgroup struct {
	dirs   []string // <id>, one per hierarchy
	jail   []string // where the jail process goes, one per hierarchy
	tasks  string   // v1: the tasks file of cmd in the pids hierarchy
	cmd    string   // v2: the cmd directory
	memory string   // the <id> with the memory controller; "" when none
	v2     bool
}

// create makes the cgroup of sandbox id with its limits.
func (cs cgroups) create(id string, pids int, memory int64) (*cgroup, error) {
	g := &cgroup{}
	fail := func(err error) (*cgroup, error) {
		g.destroy(context.Background())
		return nil, err
	}
	for _, h := range cs {
		dir := filepath.Join(h.dir, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(fmt.Errorf("create cgroup: %w", err))
		}
		g.dirs = append(g.dirs, dir)
		g.v2 = h.v2
		if h.memory {
			g.memory = dir
			mem := strconv.FormatInt(memory, 10)
			var err error
			if h.v2 {
				err = writeCgroup(dir, "memory.max", mem)
				_ = writeCgroup(dir, "memory.swap.max", "0") // absent without swap accounting
			} else {
				err = writeCgroup(dir, "memory.limit_in_bytes", mem)
				_ = writeCgroup(dir, "memory.memsw.limit_in_bytes", mem) // idem
			}
			if err != nil {
				return fail(err)
			}
		}
		if !h.pids && !h.v2 {
			g.jail = append(g.jail, dir)
			continue
		}
		if h.pids && h.v2 {
			if err := writeCgroup(dir, "cgroup.subtree_control", "+pids"); err != nil {
				return fail(err)
			}
		}
		for _, sub := range []string{"jail", "cmd"} {
			if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
				return fail(fmt.Errorf("create cgroup: %w", err))
			}
		}
		cmd := filepath.Join(dir, "cmd")
		if h.pids {
			if err := writeCgroup(cmd, "pids.max", strconv.Itoa(pids)); err != nil {
				return fail(err)
			}
		}
		g.jail = append(g.jail, filepath.Join(dir, "jail"))
		if h.v2 {
			g.cmd = cmd
		} else {
			g.tasks = filepath.Join(cmd, "tasks")
		}
	}
	return g, nil
}

func writeCgroup(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup %s: %w", file, err)
	}
	return nil
}

// add moves the jail process pid into the cgroup.
func (g *cgroup) add(pid int) error {
	if g == nil {
		return nil
	}
	for _, d := range g.jail {
		if err := writeCgroup(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// oomKills returns how many processes the kernel killed for reaching the
// cgroup's memory limit so far (0 when unknown).
func (g *cgroup) oomKills() int64 {
	if g == nil || g.memory == "" {
		return 0
	}
	file := "memory.oom_control"
	if g.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(g.memory, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// procs lists the processes in the cgroup and its children.
func (g *cgroup) procs() []int {
	var out []int
	for _, d := range tree(g.dirs) {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !containsInt(out, pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// destroy kills every process in the cgroup and removes it. Killed
// processes leave the cgroup a moment after the signal, so removal is
// retried (with a short backoff, bounded by ctx and 10 s) while the kernel
// reports it busy.
func (g *cgroup) destroy(ctx context.Context) error {
	if g == nil {
		return nil
	}
	return removeCgroups(ctx, g.dirs)
}

// tree lists dirs with their child cgroups, children first.
func tree(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
		out = append(out, d)
	}
	return out
}

// removeCgroups kills the processes of the cgroup directories dirs (and
// their children) and removes them.
func removeCgroups(ctx context.Context, dirs []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g := &cgroup{dirs: tree(dirs)}
	wait := time.Millisecond
	for {
		for _, d := range g.dirs {
			_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0) // v2, Linux ≥ 5.14
		}
		for _, pid := range g.procs() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		var busy []string
		var errs []error
		for _, d := range g.dirs {
			err := os.Remove(d)
			switch {
			case err == nil || errors.Is(err, os.ErrNotExist):
			case errors.Is(err, syscall.EBUSY):
				busy = append(busy, d)
			default:
				errs = append(errs, err)
			}
		}
		if len(busy) == 0 || len(errs) > 0 {
			return errors.Join(errs...)
		}
		g.dirs = busy
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("remove cgroup %s: still busy: %w", busy[0], ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// leftovers lists the sandbox cgroups under the driver's parents, each
// with its directories, by sandbox id.
func (cs cgroups) leftovers() map[string][]string {
	out := map[string][]string{}
	for _, h := range cs {
		ents, _ := os.ReadDir(h.dir)
		for _, e := range ents {
			if e.IsDir() {
				out[e.Name()] = append(out[e.Name()], filepath.Join(h.dir, e.Name()))
			}
		}
	}
	return out
}
