package baton_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// layers is the dependency rule of docs/architecture.md ("Packages and
// dependency rules") as data: for every package of the module, the
// module packages its non-test code may import. A package missing from
// the table fails the test, so a new package has to take its place in the
// layering (and in the docs) before it can land.
var layers = map[string]rule{
	// The domain and the Go SDK import only the standard library.
	"":                             stdOnly(),
	"client":                       stdOnly("internal/proc"),
	"client/executor":              may("executor/proto", "internal/proc"), // the SDK: never a server package
	"client/executor/executortest": may("client/executor"),
	"examples/harness":             may("client"),
	"examples/laptop":              may("client"),
	"bench/loadgen":                may("client"),

	// Shared leaves: the domain and other leaves only.
	"internal/rawjson":         stdOnly(""),
	"internal/serde":           stdOnly("internal/rawjson"),
	"internal/supervisor":      stdOnly(),
	"internal/proc":            stdOnly(),   // std-only, so the SDK may use it
	"internal/clocktest":       stdOnly(""), // test clocks of baton.Clock
	"internal/httpx":           may("", "internal/rawjson", "internal/serde"),
	"internal/testkit":         stdOnly(), // the end-to-end harness; the command is injected
	"internal/pgtest":          may(),     // throwaway PostgreSQL schemas for tests
	"internal/httpx/httpxtest": may("internal/httpx"),
	"wire":                     stdOnly("", "internal/rawjson"),
	"executor/proto":           stdOnly(),
	"filearea":                 stdOnly(""),
	"provider":                 stdOnly(""),
	"provider/sse":             stdOnly(),

	// Adapters: the domain and the leaves, never each other, with the
	// edges docs/architecture.md names.
	"hub":                 may(""),
	"auth":                may("", "filearea").notLinking(websocket),
	"store":               may("", "filearea").notLinking(websocket),
	"config":              may(""),
	"mcp":                 may(""),
	"mcp/mcptest":         may(),
	"sandbox":             may(""),
	"sandbox/sandboxtest": may(),
	"provider/anthropic":  may("", "provider", "provider/sse", "internal/httpx", "internal/rawjson"),
	"provider/openai":     may("", "provider", "provider/sse", "internal/httpx", "internal/rawjson"),
	"provider/scripted":   may("", "provider", "internal/rawjson"),
	"httpapi":             may("", "wire", "internal/httpx", "filearea"),
	"adminapi":            may("", "wire", "internal/httpx", "internal/rawjson"),
	"executor":            may("", "executor/proto", "executor/peer", "filearea", "internal/httpx"),
	"executor/peer":       may("", "executor/proto", "wire"),
	// gateway: auth.TurnGrant, and the model APIs it serves.
	"gateway": may("", "auth", "provider", "provider/anthropic", "provider/openai", "internal/httpx", "internal/rawjson"),

	// The engine orchestrates through the domain's interfaces.
	"engine":  may("", "internal/rawjson", "internal/serde"),
	"cluster": may("", "wire", "internal/httpx"),

	// What baton executor serves, and the admin API's client.
	"machine":              may("", "client/executor", "internal/proc", "internal/supervisor"),
	"adminapi/adminclient": may(""),

	// The one package that wires concrete adapters together.
	"cmd/baton": anything(),
}

// rule is what one package may import: Module lists module packages by
// path relative to the module root ("" is the root package); Std limits
// the rest to the standard library; Any lifts every limit. NotLinked
// names packages it must not depend on even indirectly.
type rule struct {
	Module    []string
	Std       bool
	Any       bool
	NotLinked []string
}

// websocket is linked only by what speaks WebSocket; the store and the
// key checks must not pull it in through a shared leaf.
const websocket = "github.com/coder/websocket"

func (r rule) notLinking(pkgs ...string) rule {
	r.NotLinked = append(r.NotLinked, pkgs...)
	return r
}

func may(module ...string) rule     { return rule{Module: module} }
func stdOnly(module ...string) rule { return rule{Module: module, Std: true} }
func anything() rule                { return rule{Any: true} }

type listedPackage struct {
	ImportPath string
	Module     *struct{ Path string }
	Imports    []string
	Deps       []string
}

// TestLayering fails when a package imports what its layer forbids.
func TestLayering(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	pkgs := listModule(t, goBin)
	if len(pkgs) == 0 {
		t.Fatal("go list found no package")
	}
	mod := pkgs[0].Module.Path
	rel := func(p string) (string, bool) {
		if p == mod {
			return "", true
		}
		r, ok := strings.CutPrefix(p, mod+"/")
		return r, ok
	}
	std := standardPackages(t, goBin)
	seen := map[string]bool{}
	for _, p := range pkgs {
		name, _ := rel(p.ImportPath)
		seen[name] = true
		r, ok := layers[name]
		if !ok {
			t.Errorf("package %q has no layer: add it to layers and to docs/architecture.md", p.ImportPath)
			continue
		}
		for _, dep := range r.NotLinked {
			if slices.Contains(p.Deps, dep) {
				t.Errorf("%s links %s, which its layer forbids even indirectly", p.ImportPath, dep)
			}
		}
		if r.Any {
			continue
		}
		for _, imp := range p.Imports {
			if m, ok := rel(imp); ok {
				if !slices.Contains(r.Module, m) {
					t.Errorf("%s imports %s, which its layer forbids (docs/architecture.md)", p.ImportPath, imp)
				}
				continue
			}
			if r.Std && !std[imp] {
				t.Errorf("%s imports %s, but it may import only the standard library", p.ImportPath, imp)
			}
		}
	}
	for name := range layers {
		if !seen[name] {
			t.Errorf("layers names %q, which is not a package of the module any more", path.Join(mod, name))
		}
	}
}

// listModule returns the module's packages as go list describes them.
func listModule(t *testing.T, goBin string) []listedPackage {
	t.Helper()
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Module,Imports,Deps", "./...")
	cmd.Dir = "."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// standardPackages returns the import paths of the standard library.
func standardPackages(t *testing.T, goBin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(goBin, "list", "std").Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	std := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		std[p] = true
	}
	return std
}
