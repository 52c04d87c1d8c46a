package baton

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// catalogue parses eventtype.go and returns its constants, name to value.
func catalogue(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "eventtype.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			t.Fatalf("eventtype.go declares something other than constants")
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				v, ok := stringLit(vs.Values[i])
				if !ok {
					t.Fatalf("%s is not a string literal", n.Name)
				}
				out[n.Name] = v
			}
		}
	}
	return out
}

// stringLit is the value of e when e is a string literal.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func TestEventTypeCatalogue(t *testing.T) {
	cat := catalogue(t)
	if len(cat) < 40 {
		t.Fatalf("the catalogue has only %d types", len(cat))
	}
	byValue := map[string]string{}
	for name, v := range cat {
		if !strings.HasPrefix(name, "Event") && !strings.HasPrefix(name, "Agent") {
			t.Errorf("%s: an event type's name starts with Event or Agent", name)
		}
		if strings.Count(v, ".") == 0 || strings.ToLower(v) != v || strings.ContainsAny(v, " \t") {
			t.Errorf("%s = %q: not an event type", name, v)
		}
		if other, dup := byValue[v]; dup {
			t.Errorf("%s and %s are both %q", name, other, v)
		}
		byValue[v] = name
	}
	for name, want := range map[string]string{ // a few the wire fixes
		"EventSessionOpen": "session.open", "EventToolCall": "tool.call",
		"EventSandboxStart": "session.sandbox.start", "EventSubagentCompleted": "session.subagent.completed",
		"EventExecutorEvent": "executor.event", "EventAgentEvent": "agent.event",
	} {
		if cat[name] != want {
			t.Errorf("%s = %q, want %q", name, cat[name], want)
		}
	}
}

// TestEventTypesHaveOneHome scans the non-test Go files of the module's
// server packages (everything but the SDK under client/, examples/,
// bench/ and test doubles) and fails on an event type declared or spelled
// outside eventtype.go: a string literal equal to a catalogued type
// (except the executor protocol's method names), and an event written (NewEvent, Event{Type: …}) with a type that is a
// literal, is built from one, or is a constant that is not a catalogue
// constant.
func TestEventTypesHaveOneHome(t *testing.T) {
	for _, p := range eventTypeStrays(t, ".", catalogue(t)) {
		t.Error(p)
	}
}

// eventTypeStrays returns the problems TestEventTypesHaveOneHome reports
// for the module under root.
func eventTypeStrays(t *testing.T, root string, cat map[string]string) []string {
	t.Helper()
	values := map[string]bool{}
	for _, v := range cat {
		values[v] = true
	}
	var problems []string
	report := func(fset *token.FileSet, pos token.Pos, format string, args ...any) {
		problems = append(problems, fset.Position(pos).String()+": "+fmt.Sprintf(format, args...))
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		base := d.Name()
		switch {
		case rel == "client", rel == "examples", rel == "bench", base == "testdata",
			rel != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")),
			strings.HasSuffix(base, "test"), base == "testkit":
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		files := parseDir(t, fset, path)
		if len(files) == 0 {
			return nil
		}
		isRoot := rel == "."
		// The executor protocol's method names (tool.call, session.close,
		// …) share some event types' spelling but are another contract.
		methods := rel == filepath.Join("executor", "proto")
		consts := map[string]bool{} // the package's own constants
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				if g, ok := n.(*ast.GenDecl); ok && g.Tok == token.CONST {
					for _, s := range g.Specs {
						for _, id := range s.(*ast.ValueSpec).Names {
							consts[id.Name] = true
						}
					}
				}
				return true
			})
		}
		// eventType checks the type argument of an event written at e.
		eventType := func(fset *token.FileSet, e ast.Expr) {
			switch x := e.(type) {
			case *ast.BasicLit:
				report(fset, x.Pos(), "event type %s is a literal", x.Value)
			case *ast.BinaryExpr:
				if hasLit(x) {
					report(fset, x.Pos(), "event type built from a literal")
				}
			case *ast.Ident:
				if consts[x.Name] && !(isRoot && cat[x.Name] != "") {
					report(fset, x.Pos(), "event type %s is a constant outside the catalogue", x.Name)
				}
			case *ast.SelectorExpr:
				if pkg, ok := x.X.(*ast.Ident); ok && pkg.Name == "baton" && cat[x.Sel.Name] == "" {
					report(fset, x.Pos(), "event type baton.%s is not in the catalogue", x.Sel.Name)
				}
			}
		}
		for name, f := range files {
			if isRoot && filepath.Base(name) == "eventtype.go" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.BasicLit:
					if s, ok := stringLit(x); ok && values[s] && !methods {
						report(fset, x.Pos(), "%s spells the catalogued event type %q", x.Value, s)
					}
				case *ast.CallExpr:
					if isName(x.Fun, "NewEvent", isRoot) && len(x.Args) == 4 {
						eventType(fset, x.Args[2])
					}
				case *ast.CompositeLit:
					if isName(x.Type, "Event", isRoot) {
						for _, el := range x.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok {
								if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Type" {
									eventType(fset, kv.Value)
								}
							}
						}
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// parseDir parses the non-test Go files of dir, by file name.
func parseDir(t *testing.T, fset *token.FileSet, dir string) map[string]*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = f
	}
	return files
}

// isName reports whether e names the root package's name: baton.name, or
// name itself inside the root package.
func isName(e ast.Expr, name string, isRoot bool) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return isRoot && x.Name == name
	case *ast.SelectorExpr:
		pkg, ok := x.X.(*ast.Ident)
		return ok && pkg.Name == "baton" && x.Sel.Name == name
	}
	return false
}

// hasLit reports whether e contains a string literal.
func hasLit(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if _, ok := n.(*ast.BasicLit); ok {
			found = true
		}
		return !found
	})
	return found
}

// TestEventTypeStraysFound proves the scan catches what it is for: a
// server package that writes an event type of its own, as engine's
// private subagent constants once did.
func TestEventTypeStraysFound(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("engine/stray.go", `package engine

import "github.com/baton-engine/baton"

const eventAgentStart = "session.subagent.start"

const eventOwn = "session.own.thing"

func f(state string) {
	_ = baton.NewEvent("s", "k", eventAgentStart, nil)
	_ = baton.NewEvent("s", "k", "session.sandbox."+state, nil)
	_ = baton.NewEvent("s", "k", "session.brand.new", nil)
	_ = &baton.Event{Type: eventOwn}
	_ = baton.NewEvent("s", "k", baton.EventNotCatalogued, nil)
	_ = baton.NewEvent("s", "k", baton.EventSessionOpen, nil) // fine
}
`)
	write("executor/proto/method.go", `package proto

const MethodToolCall = "tool.call" // a method name, not an event type
`)
	write("client/sdk.go", `package client

const toolCall = "tool.call" // the SDK keeps its own names
`)
	cat := catalogue(t)
	got := eventTypeStrays(t, root, cat)
	want := []string{
		`"session.subagent.start" spells the catalogued event type`,
		"event type eventAgentStart is a constant outside the catalogue",
		"event type built from a literal",
		`event type "session.brand.new" is a literal`,
		"event type eventOwn is a constant outside the catalogue",
		"event type baton.EventNotCatalogued is not in the catalogue",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
}
