package client

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fileTree builds, under a fresh directory:
//
//	allowed/notes.txt "hello", allowed/NOTES.TXT, allowed/app.env,
//	allowed/.env, allowed/README, allowed/secret.txt "no",
//	allowed/sub/b.txt "bb", allowed/escape.txt -> outside/secret.txt,
//	allowed/inner.txt -> allowed/sub/b.txt, allowed/outdir -> outside/sub,
//	allowed/dangling -> outside/new.txt (missing), allowed/loop -> allowed,
//	allowed2/f.txt, outside/secret.txt "TOPSECRET", outside/sub/
//
// and returns the real path of the directory (t.TempDir may sit behind a
// symlink).
func fileTree(t testing.TB, dir string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"allowed/notes.txt": "hello", "allowed/NOTES.TXT": "upper", "allowed/app.env": "SECRET=1",
		"allowed/.env": "SECRET=2", "allowed/README": "readme", "allowed/secret.txt": "no",
		"allowed/sub/b.txt": "bb", "allowed2/f.txt": "f", "outside/secret.txt": "TOPSECRET",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "outside/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"allowed/escape.txt": filepath.Join(root, "outside/secret.txt"),
		"allowed/inner.txt":  "sub/b.txt",
		"allowed/outdir":     filepath.Join(root, "outside/sub"),
		"allowed/dangling":   filepath.Join(root, "outside/new.txt"),
		"allowed/loop":       ".",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fileTool returns the handler of the file tool called name.
func fileTool(t testing.TB, cfg FileToolsConfig, name string) ToolHandler {
	t.Helper()
	for _, tl := range FileTools(cfg) {
		if tl.Def.Name == name {
			return tl.Handler
		}
	}
	t.Fatalf("no file tool %q", name)
	return nil
}

// runFile calls a file tool with input (JSON) and returns its text.
func runFile(t testing.TB, cfg FileToolsConfig, name, input string) string {
	t.Helper()
	v, err := fileTool(t, cfg, name)(context.Background(), json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s returned a handler error: %v", name, err)
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s returned %T, want JSON text", name, v)
	}
	return s
}

func pathInput(p string) string {
	b, _ := json.Marshal(map[string]string{"path": p})
	return string(b)
}

func TestReadFileRules(t *testing.T) {
	root := fileTree(t, t.TempDir())
	a := filepath.Join(root, "allowed")
	base := FileToolsConfig{Dirs: []string{a}}
	with := func(f func(*FileToolsConfig)) FileToolsConfig {
		c := base
		f(&c)
		return c
	}
	notUnder := func(p string) string {
		return errorText("path not permitted: `" + p + "` is not under any allowed directory")
	}
	content := func(p, c string) string {
		return jsonText(struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}{p, c})
	}
	tests := []struct {
		name  string
		cfg   FileToolsConfig
		input string
		want  string
	}{
		{"permitted", base, pathInput(a + "/notes.txt"), content(a+"/notes.txt", "hello")},
		{"path echoed as given", base, pathInput(a + "/sub/../notes.txt"), content(a+"/sub/../notes.txt", "hello")},
		{"dot-dot escape", base, pathInput(a + "/../outside/secret.txt"), notUnder(a + "/../outside/secret.txt")},
		{"symlink escape", base, pathInput(a + "/escape.txt"), notUnder(a + "/escape.txt")},
		{"dot-dot after a symlinked dir", base, pathInput(a + "/outdir/../secret.txt"), notUnder(a + "/outdir/../secret.txt")},
		{"symlink inside", base, pathInput(a + "/inner.txt"), content(a+"/inner.txt", "bb")},
		{"absolute elsewhere", base, pathInput("/etc/passwd"), notUnder("/etc/passwd")},
		{"sibling with the same prefix", base, pathInput(root + "/allowed2/f.txt"), notUnder(root + "/allowed2/f.txt")},
		{"no dirs allows nothing", FileToolsConfig{}, pathInput(a + "/notes.txt"), notUnder(a + "/notes.txt")},
		{"second dir matches", FileToolsConfig{Dirs: []string{"/nonexistent", root + "/allowed2", a}}, pathInput(root + "/allowed2/f.txt"), content(root+"/allowed2/f.txt", "f")},
		{"dir given through a symlink", FileToolsConfig{Dirs: []string{a + "/loop"}}, pathInput(a + "/notes.txt"), content(a+"/notes.txt", "hello")},
		{"denied extension", with(func(c *FileToolsConfig) { c.DeniedExtensions = []string{"env"} }), pathInput(a + "/app.env"),
			errorText("path not permitted: extension `.env` is denied")},
		{"dotfile extension", with(func(c *FileToolsConfig) { c.DeniedExtensions = []string{".ENV"} }), pathInput(a + "/.env"),
			errorText("path not permitted: extension `.env` is denied")},
		{"denied wins over allowed", with(func(c *FileToolsConfig) {
			c.Extensions, c.DeniedExtensions = []string{"env", "txt"}, []string{"env"}
		}), pathInput(a + "/app.env"), errorText("path not permitted: extension `.env` is denied")},
		{"allowed extension, case-insensitive", with(func(c *FileToolsConfig) { c.Extensions = []string{".txt"} }), pathInput(a + "/NOTES.TXT"),
			content(a+"/NOTES.TXT", "upper")},
		{"extension not allowed", with(func(c *FileToolsConfig) { c.Extensions = []string{"md"} }), pathInput(a + "/notes.txt"),
			errorText("path not permitted: extension is not in the allowed set")},
		{"no extension with an allowed set", with(func(c *FileToolsConfig) { c.Extensions = []string{"txt"} }), pathInput(a + "/README"),
			errorText("path not permitted: extension is not in the allowed set")},
		{"deny pattern", with(func(c *FileToolsConfig) { c.DenyPattern = regexp.MustCompile(`secret`) }), pathInput(a + "/secret.txt"),
			errorText("path not permitted: filename matches the deny pattern")},
		{"deny pattern wins over allow pattern", with(func(c *FileToolsConfig) {
			c.NamePattern, c.DenyPattern = regexp.MustCompile(`\.txt$`), regexp.MustCompile(`secret`)
		}), pathInput(a + "/secret.txt"), errorText("path not permitted: filename matches the deny pattern")},
		{"allow pattern match", with(func(c *FileToolsConfig) { c.NamePattern = regexp.MustCompile(`\.txt$`) }), pathInput(a + "/notes.txt"),
			content(a+"/notes.txt", "hello")},
		{"allow pattern miss", with(func(c *FileToolsConfig) { c.NamePattern = regexp.MustCompile(`\.md$`) }), pathInput(a + "/notes.txt"),
			errorText("path not permitted: filename does not match the allow pattern")},
		{"pattern sees the resolved name", with(func(c *FileToolsConfig) { c.NamePattern = regexp.MustCompile(`^b\.txt$`) }), pathInput(a + "/inner.txt"),
			content(a+"/inner.txt", "bb")},
		{"NUL byte", base, pathInput(a + "/notes.txt\x00.md"),
			errorText("path not permitted: cannot resolve `" + a + "/notes.txt\x00.md`: path contains a NUL byte")},
		{"missing component then dot-dot", base, pathInput(a + "/missing/../notes.txt"),
			errorText("path not permitted: cannot resolve `" + a + "/missing/../notes.txt`: lstat " + a + "/missing: no such file or directory")},
		{"path not a string", base, `{"path":7}`, errorText("read_file requires a string `path`")},
		{"path absent", base, `{}`, errorText("read_file requires a string `path`")},
		{"missing file", base, pathInput(a + "/nope.txt"), errorText("read failed: open " + a + "/nope.txt: no such file or directory")},
		{"a directory", base, pathInput(a + "/sub"), errorText("read failed: read " + a + "/sub: is a directory")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runFile(t, tt.cfg, "read_file", tt.input); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestReadFileRelative(t *testing.T) {
	root := fileTree(t, t.TempDir())
	t.Chdir(root)
	got := runFile(t, FileToolsConfig{Dirs: []string{"allowed"}}, "read_file", pathInput("allowed/sub/../notes.txt"))
	if !strings.Contains(got, `"content":"hello"`) {
		t.Errorf("relative read: %s", got)
	}
	got = runFile(t, FileToolsConfig{Dirs: []string{"allowed"}}, "read_file", pathInput("outside/secret.txt"))
	if !strings.Contains(got, "is not under any allowed directory") {
		t.Errorf("relative escape: %s", got)
	}
}

func TestWriteFile(t *testing.T) {
	root := fileTree(t, t.TempDir())
	a := filepath.Join(root, "allowed")
	cfg := FileToolsConfig{Dirs: []string{a}, DeniedExtensions: []string{"env"}}
	write := func(cfg FileToolsConfig, p, content string) string {
		b, _ := json.Marshal(map[string]string{"path": p, "content": content})
		return runFile(t, cfg, "write_file", string(b))
	}

	if got, want := write(cfg, a+"/out.txt", "héllo"), `{"path":"`+a+`/out.txt","bytes_written":6}`; got != want {
		t.Errorf("write: %s, want %s", got, want)
	}
	if b, _ := os.ReadFile(a + "/out.txt"); string(b) != "héllo" {
		t.Errorf("file holds %q", b)
	}
	if got := runFile(t, cfg, "write_file", `{"path":"`+a+`/empty.txt","content":3}`); got != `{"path":"`+a+`/empty.txt","bytes_written":0}` {
		t.Errorf("non-string content: %s", got)
	}

	want := errorText("path not permitted: parent directory does not exist (enable createParents to allow)")
	if got := write(cfg, a+"/new/deep/out.txt", "x"); got != want {
		t.Errorf("missing parent: %s", got)
	}
	if _, err := os.Stat(a + "/new"); err == nil {
		t.Error("missing parent was created without CreateParents")
	}
	cfg.CreateParents = true
	if got := write(cfg, a+"/new/deep/out.txt", "x"); !strings.Contains(got, `"bytes_written":1`) {
		t.Errorf("CreateParents: %s", got)
	}
	if b, _ := os.ReadFile(a + "/new/deep/out.txt"); string(b) != "x" {
		t.Errorf("created file holds %q", b)
	}

	// A dangling symlink pointing outside must not create its target.
	if got := write(cfg, a+"/dangling", "pwned"); !strings.Contains(got, "is not under any allowed directory") {
		t.Errorf("dangling escape: %s", got)
	}
	if _, err := os.Stat(root + "/outside/new.txt"); err == nil {
		t.Error("write through a dangling symlink created a file outside")
	}
	for _, p := range []string{a + "/escape.txt", a + "/outdir/x.txt", a + "/../outside/x.txt"} {
		if got := write(cfg, p, "pwned"); !strings.Contains(got, "is not under any allowed directory") {
			t.Errorf("write %s: %s", p, got)
		}
	}
	if got := write(cfg, a+"/x.env", "S=1"); got != errorText("path not permitted: extension `.env` is denied") {
		t.Errorf("denied write: %s", got)
	}
	if b, _ := os.ReadFile(root + "/outside/secret.txt"); string(b) != "TOPSECRET" {
		t.Errorf("outside file changed: %q", b)
	}
	if got := runFile(t, cfg, "write_file", `{"content":"x"}`); got != errorText("write_file requires a string `path`") {
		t.Errorf("no path: %s", got)
	}
}

func TestFileToolsDefs(t *testing.T) {
	names := func(ts []Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Def.Name)
		}
		return out
	}
	if d := cmp.Diff([]string{"read_file", "write_file", "explore_files"}, names(FileTools(FileToolsConfig{}))); d != "" {
		t.Errorf("tools (-want +got):\n%s", d)
	}
	ro := FileTools(FileToolsConfig{ReadOnly: true})
	if d := cmp.Diff([]string{"read_file", "explore_files"}, names(ro)); d != "" {
		t.Errorf("read-only tools (-want +got):\n%s", d)
	}
	for _, tl := range FileTools(FileToolsConfig{}) {
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
			Additional *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(tl.Def.InputSchema, &schema); err != nil {
			t.Fatalf("%s schema: %v", tl.Def.Name, err)
		}
		wantReq := map[string][]string{"read_file": {"path"}, "write_file": {"path", "content"}, "explore_files": {"path"}}[tl.Def.Name]
		if schema.Type != "object" || !slices.Equal(schema.Required, wantReq) || schema.Additional == nil || *schema.Additional ||
			schema.Properties["path"] == nil {
			t.Errorf("%s schema %s", tl.Def.Name, tl.Def.InputSchema)
		}
	}
}

func decodeEntries(t *testing.T, s string) []fileEntry {
	t.Helper()
	var out []fileEntry
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("explore result %s: %v", s, err)
	}
	return out
}

func TestExploreFiles(t *testing.T) {
	root := fileTree(t, t.TempDir())
	a := filepath.Join(root, "allowed")
	cfg := FileToolsConfig{Dirs: []string{a}}

	got := decodeEntries(t, runFile(t, cfg, "explore_files", pathInput(a)))
	want := []fileEntry{
		{".env", false, 8}, {"NOTES.TXT", false, 5}, {"README", false, 6}, {"app.env", false, 8},
		// inner.txt resolves to sub/b.txt; loop, to the root, is left out.
		{"notes.txt", false, 5}, {"secret.txt", false, 2}, {"sub", true, 0}, {"sub/b.txt", false, 2},
	}
	slices.SortFunc(want, func(x, y fileEntry) int { return strings.Compare(x.Path, y.Path) })
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("flat listing (-want +got):\n%s", d)
	}

	// Recursive: the symlink loop ends, escapes stay out, every path is
	// listed once and read_file accepts each of them.
	cfg.DeniedExtensions = []string{"env"}
	cfg.Extensions = []string{"txt"}
	got = decodeEntries(t, runFile(t, cfg, "explore_files", `{"path":"`+a+`/sub/..","recursive":true}`))
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Path)
	}
	if d := cmp.Diff([]string{"NOTES.TXT", "notes.txt", "secret.txt", "sub", "sub/b.txt"}, paths); d != "" {
		t.Errorf("recursive listing (-want +got):\n%s", d)
	}
	for _, p := range paths {
		if res := runFile(t, cfg, "read_file", pathInput(filepath.Join(a, p))); strings.Contains(res, "path not permitted") {
			t.Errorf("explore listed %q but read_file refuses it: %s", p, res)
		}
	}

	cases := map[string]string{
		pathInput(a + "/notes.txt"):       errorText("`" + a + "/notes.txt` is not a directory"),
		pathInput(a + "/outdir"):          errorText("path not permitted: `" + a + "/outdir` is not under any allowed directory"),
		pathInput(a + "/gone.txt"):        errorText("read failed: stat " + a + "/gone.txt: no such file or directory"),
		`{"path":null}`:                   errorText("explore_files requires a string `path`"),
		pathInput(root + "/outside/sub/"): errorText("path not permitted: `" + root + "/outside/sub/` is not under any allowed directory"),
	}
	for in, want := range cases {
		if got := runFile(t, cfg, "explore_files", in); got != want {
			t.Errorf("explore %s: %s, want %s", in, got, want)
		}
	}
	empty := filepath.Join(a, "sub", "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := runFile(t, cfg, "explore_files", pathInput(empty)); got != "[]" {
		t.Errorf("empty dir: %s", got)
	}
}

// FuzzPathCheck drives read_file and write_file with arbitrary paths under
// (or beside) an allowed directory holding escaping symlinks: nothing
// outside may ever be read or written.
func FuzzPathCheck(f *testing.F) {
	root := fileTree(f, f.TempDir())
	a := filepath.Join(root, "allowed")
	cfg := FileToolsConfig{Dirs: []string{a}, CreateParents: true}
	outside := listTree(f, filepath.Join(root, "outside"))
	for _, s := range []string{
		"notes.txt", "../", "..", "../outside/secret.txt", "/etc/passwd", "escape.txt", "outdir/../secret.txt",
		"outdir/x", "dangling", "loop/loop/loop/notes.txt", "a\x00b", "sub/../../outside/secret.txt",
		"missing/../../outside/x", "", ".", "./", "//", "sub/./b.txt", "new/dir/f.txt", root + "/outside/x",
		"escape.txt/", "dangling/x", "loop/../../outside/secret.txt", "\xff\xfe", "sub/" + strings.Repeat("../", 30) + "etc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := s
		if !strings.HasPrefix(s, "/") {
			p = a + "/" + s
		}
		// The tools see the path after JSON, which replaces invalid UTF-8.
		b, _ := json.Marshal(p)
		_ = json.Unmarshal(b, &p)
		if got := runFile(t, cfg, "read_file", pathInput(p)); strings.Contains(got, "TOPSECRET") {
			t.Fatalf("read_file %q leaked the outside file: %s", p, got)
		}
		real, rerr := resolve(p) // before the write creates it
		b, _ = json.Marshal(map[string]string{"path": p, "content": "fuzz"})
		got := runFile(t, cfg, "write_file", string(b))
		if !strings.HasPrefix(got, `{"error":`) {
			if rerr != nil || !within(real, a) {
				t.Fatalf("write_file %q succeeded (%s) at %q", p, got, real)
			}
		}
		if d := cmp.Diff(outside, listTree(t, filepath.Join(root, "outside"))); d != "" {
			t.Fatalf("write_file %q changed the outside directory (-before +after):\n%s", p, d)
		}
	})
}

// listTree returns every path under dir with its content.
func listTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		} else {
			out[p] = "/"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func BenchmarkFileCheck(b *testing.B) {
	root := fileTree(b, b.TempDir())
	p := &filePolicy{cfg: FileToolsConfig{Dirs: []string{root + "/allowed"}, DeniedExtensions: []string{"env"}, NamePattern: regexp.MustCompile(`\.txt$`)}}
	path := root + "/allowed/sub/../inner.txt"
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.check(p.roots(), path); err != nil {
			b.Fatal(err)
		}
	}
}
