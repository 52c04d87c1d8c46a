package auth

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

// memoryToken and memoryHash are an admin key and its Argon2id hash with
// BAE's parameters (64 MiB, three passes, one lane).
const (
	memoryToken = "bae_admin_memorytest"
	memoryHash  = "$argon2id$v=19$m=65536,t=3,p=1$i+nwACWgniFDtDMpajWEOA$IU2wDeYvsjh4Ilj4PIs+wth2A+Qq21T07HcjwIxeYkU"
)

// maxArgon2Residue is how much more memory may stay resident after an
// Argon2id computation and a collection: well under its 64 MiB.
const maxArgon2Residue = 16 << 20

// TestArgon2MemoryReturned: after verifying an admin key, and after
// hashing a new one, an ordinary collection leaves the process about as
// resident as before: the 64 MiB working area went back to the operating
// system, instead of staying resident as free heap.
func TestArgon2MemoryReturned(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	keys := newFakeKeys()
	keys.add(&baton.Key{ID: "key_mem", Hash: memoryHash, Role: baton.RoleAdmin, Prefix: memoryToken[:8]})
	a := New(Options{Keys: keys})

	steps := []struct {
		name string
		run  func() error
	}{
		{"verify", func() error { return a.AdminKey(context.Background(), memoryToken) }},
		{"hash", func() error { _, err := HashAdmin(memoryToken); return err }},
	}
	for _, step := range steps {
		debug.FreeOSMemory() // a clean start: nothing freed earlier still resident
		goBefore, rssBefore := goResident(), vmRSS(t)
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		runtime.GC() // what the server does by itself; FreeOSMemory here would hide the bug
		goAfter, rssAfter := goResident(), vmRSS(t)
		t.Logf("%s: Go resident %+.1f MiB, VmRSS %+.1f MiB", step.name, mib(goAfter-goBefore), mib(rssAfter-rssBefore))
		if goAfter-goBefore > maxArgon2Residue {
			t.Errorf("%s: the Go runtime keeps %.1f MiB more resident after a collection, want under %d MiB",
				step.name, mib(goAfter-goBefore), maxArgon2Residue>>20)
		}
		if !raceEnabled && rssAfter-rssBefore > maxArgon2Residue {
			t.Errorf("%s: VmRSS grew by %.1f MiB, want under %d MiB", step.name, mib(rssAfter-rssBefore), maxArgon2Residue>>20)
		}
	}
}

// goResident is the memory the Go runtime has mapped and not returned to
// the operating system: its share of the resident set.
func goResident() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}

// vmRSS reads this process's resident set size, in bytes.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", sc.Text(), err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
