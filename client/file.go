package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// FileToolsConfig is the policy of the file tools. Every path a tool is
// given is checked in this order, and the first failing rule rejects it:
//
//  1. it is made absolute and resolved through the file system, symlinks
//     and ".." included (for a path that does not exist yet, the longest
//     existing ancestor is resolved and the rest appended);
//  2. the result must be one of Dirs, resolved the same way, or inside
//     one; the first match is the path's root;
//  3. its extension must not be in DeniedExtensions;
//  4. when Extensions is not empty, a file's extension must be in it;
//  5. its base name must not match DenyPattern;
//  6. when NamePattern is set, a file's base name must match it.
//
// Extensions compare lower-case without the leading dot: "Notes.TXT" has
// extension "txt" and ".env" has "env". Rules 3 and 5 apply to
// directories too; rules 4 and 6 only to files, so a policy allowing
// "*.go" still lets explore_files list the directories holding them (BAE
// applies them to directories as well, which makes explore_files refuse
// every directory under such a policy).
type FileToolsConfig struct {
	// Dirs are the directories the tools may touch. Empty allows nothing.
	Dirs []string
	// Extensions, when not empty, are the only extensions a file may have.
	Extensions []string
	// DeniedExtensions are refused even when Extensions lists them.
	DeniedExtensions []string
	// NamePattern, when set, must match a file's base name.
	NamePattern *regexp.Regexp
	// DenyPattern refuses base names it matches; it wins over NamePattern.
	DenyPattern *regexp.Regexp
	// CreateParents lets write_file create missing parent directories.
	CreateParents bool
	// ReadOnly leaves write_file out of FileTools.
	ReadOnly bool
}

// FileTools returns the file tools BAE's SDKs ship, checked against cfg:
// read_file ({path} → {"path","content"}), write_file ({path, content} →
// {"path","bytes_written"}), unless cfg.ReadOnly, and explore_files
// ({path, recursive?} → [{"path","is_dir","size_bytes"}], paths relative
// to the matched root, sorted, listing only what read_file would accept).
// Results are JSON text. A refused path or an I/O failure is an in-band
// result {"error": "path not permitted: …" | "read failed: …" | …}, not
// a handler error, so the model can read it and try another path.
//
// The tools need no session; register them with Harness.RegisterTools.
func FileTools(cfg FileToolsConfig) []Tool {
	p := &filePolicy{cfg: cfg}
	tools := []Tool{
		{Def: ToolDef{
			Name: "read_file",
			Description: "Read a UTF-8 text file. The path must satisfy the tool's configured " +
				"directory/extension/filename constraints; a disallowed path returns an error result.",
			InputSchema: pathSchema(""),
		}, Handler: p.read},
	}
	if !cfg.ReadOnly {
		tools = append(tools, Tool{Def: ToolDef{
			Name: "write_file",
			Description: "Write a UTF-8 text file. The path must satisfy the tool's configured constraints, and " +
				"(unless createParents is enabled) its parent directory must already exist.",
			InputSchema: pathSchema(`"content":{"type":"string","description":"The UTF-8 text to write."}`),
		}, Handler: p.write})
	}
	return append(tools, Tool{Def: ToolDef{
		Name: "explore_files",
		Description: "List files under a permitted directory (non-recursive unless recursive=true). Only " +
			"entries that satisfy the same constraints as read_file are returned.",
		InputSchema: pathSchema(`"recursive":{"type":"boolean","description":"Descend into subdirectories (default false)."}`),
	}, Handler: p.explore})
}

// pathSchema is the input schema of a file tool: a required path, the
// extra property (raw JSON members) and nothing else.
func pathSchema(extra string) json.RawMessage {
	props := `"path":{"type":"string","description":"Filesystem path, validated against the tool's security constraints."}`
	required := `["path"]`
	if extra != "" {
		props += "," + extra
		if strings.HasPrefix(extra, `"content"`) {
			required = `["path","content"]`
		}
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + required + `,"additionalProperties":false}`)
}

type filePolicy struct {
	cfg FileToolsConfig
}

// fileInput is the input of a file tool; absent or mistyped members
// decode as nil.
type fileInput struct {
	Path      any `json:"path"`
	Content   any `json:"content"`
	Recursive any `json:"recursive"`
}

func decodeFileInput(raw json.RawMessage) fileInput {
	var in fileInput
	_ = json.Unmarshal(raw, &in)
	return in
}

func (p *filePolicy) read(_ context.Context, raw json.RawMessage) (any, error) {
	in := decodeFileInput(raw)
	path, ok := in.Path.(string)
	if !ok {
		return errorText("read_file requires a string `path`"), nil
	}
	real, _, err := p.check(p.roots(), path)
	if err != nil {
		return errorText("path not permitted: " + err.Error()), nil
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return errorText("read failed: " + err.Error()), nil
	}
	return jsonText(struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}{path, string(b)}), nil
}

func (p *filePolicy) write(_ context.Context, raw json.RawMessage) (any, error) {
	in := decodeFileInput(raw)
	path, ok := in.Path.(string)
	if !ok {
		return errorText("write_file requires a string `path`"), nil
	}
	content, _ := in.Content.(string)
	real, _, err := p.check(p.roots(), path)
	if err != nil {
		return errorText("path not permitted: " + err.Error()), nil
	}
	parent := filepath.Dir(real)
	if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
		if !p.cfg.CreateParents {
			return errorText("path not permitted: parent directory does not exist (enable createParents to allow)"), nil
		}
		if err := os.MkdirAll(parent, 0o777); err != nil {
			return errorText("could not create parents: " + err.Error()), nil
		}
	}
	if err := os.WriteFile(real, []byte(content), 0o666); err != nil {
		return errorText("write failed: " + err.Error()), nil
	}
	return jsonText(struct {
		Path         string `json:"path"`
		BytesWritten int    `json:"bytes_written"`
	}{path, len(content)}), nil
}

// fileEntry is one explore_files entry.
type fileEntry struct {
	Path      string `json:"path"`
	IsDir     bool   `json:"is_dir"`
	SizeBytes int64  `json:"size_bytes"`
}

func (p *filePolicy) explore(_ context.Context, raw json.RawMessage) (any, error) {
	in := decodeFileInput(raw)
	path, ok := in.Path.(string)
	if !ok {
		return errorText("explore_files requires a string `path`"), nil
	}
	recursive, _ := in.Recursive.(bool)
	roots := p.roots()
	real, root, err := p.check(roots, path)
	if err != nil {
		return errorText("path not permitted: " + err.Error()), nil
	}
	fi, err := os.Stat(real)
	if err != nil {
		return errorText("read failed: " + err.Error()), nil
	}
	if !fi.IsDir() {
		return errorText(fmt.Sprintf("`%s` is not a directory", path)), nil
	}
	w := &walker{p: p, roots: roots, root: root, recursive: recursive,
		seen: map[string]bool{real: true}, listed: map[string]bool{real: true, root: true}}
	w.walk(real)
	slices.SortFunc(w.out, func(a, b fileEntry) int { return strings.Compare(a.Path, b.Path) })
	if w.out == nil {
		w.out = []fileEntry{}
	}
	return jsonText(w.out), nil
}

// walker lists a directory tree for explore_files. seen holds the
// directories entered, so a symlink back up the tree cannot loop; listed
// holds the entries emitted (and the listed directory and the root), so a
// target reached through several links is listed once and a link to the
// listed directory or the root is not listed.
type walker struct {
	p         *filePolicy
	roots     []string
	root      string
	recursive bool
	seen      map[string]bool
	listed    map[string]bool
	out       []fileEntry
}

func (w *walker) walk(dir string) {
	names, err := readDirNames(dir)
	if err != nil {
		return
	}
	for _, name := range names {
		real, err := filepath.EvalSymlinks(filepath.Join(dir, name))
		if err != nil || !within(real, w.root) {
			continue // dangling, or escaping the root through a symlink
		}
		fi, err := os.Stat(real)
		if err != nil {
			continue
		}
		if _, _, err := w.p.check(w.roots, real); err == nil && !w.listed[real] {
			w.listed[real] = true
			rel, _ := filepath.Rel(w.root, real)
			e := fileEntry{Path: rel, IsDir: fi.IsDir()}
			if !e.IsDir {
				e.SizeBytes = fi.Size()
			}
			w.out = append(w.out, e)
		}
		if fi.IsDir() && w.recursive && !w.seen[real] {
			w.seen[real] = true
			w.walk(real)
		}
	}
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// roots returns the allowed directories resolved through the file
// system; those that do not resolve are left out.
func (p *filePolicy) roots() []string {
	out := make([]string, 0, len(p.cfg.Dirs))
	for _, d := range p.cfg.Dirs {
		if r, err := filepath.EvalSymlinks(absolute(d)); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// check validates path against the policy (the order is in the
// FileToolsConfig doc) and returns its resolved form and root. The error
// is the reason, without the "path not permitted: " prefix.
func (p *filePolicy) check(roots []string, path string) (real, root string, err error) {
	real, err = resolve(path)
	if err != nil {
		return "", "", fmt.Errorf("cannot resolve `%s`: %w", path, err)
	}
	for _, r := range roots {
		if within(real, r) {
			root = r
			break
		}
	}
	if root == "" {
		return "", "", fmt.Errorf("`%s` is not under any allowed directory", path)
	}
	name := filepath.Base(real)
	ext := extension(name)
	isFile := true
	if fi, err := os.Stat(real); err == nil && fi.IsDir() {
		isFile = false
	}
	switch {
	case ext != "" && hasExt(p.cfg.DeniedExtensions, ext):
		return "", "", fmt.Errorf("extension `.%s` is denied", ext)
	case isFile && len(p.cfg.Extensions) > 0 && (ext == "" || !hasExt(p.cfg.Extensions, ext)):
		return "", "", errors.New("extension is not in the allowed set")
	case p.cfg.DenyPattern != nil && p.cfg.DenyPattern.MatchString(name):
		return "", "", errors.New("filename matches the deny pattern")
	case isFile && p.cfg.NamePattern != nil && !p.cfg.NamePattern.MatchString(name):
		return "", "", errors.New("filename does not match the allow pattern")
	}
	return real, root, nil
}

// absolute makes p absolute without cleaning it: ".." must be resolved
// after the symlinks before it, never lexically.
func absolute(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	return wd + string(filepath.Separator) + p
}

// resolve returns the real path of p. A path that does not exist resolves
// its longest existing ancestor and appends the missing rest literally; a
// missing component followed by ".." or "." does not resolve. A dangling
// symlink resolves to where it points, so writing through it cannot
// create a file outside the allowed directories (BAE's SDKs resolve it to
// the link itself).
func resolve(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path contains a NUL byte")
	}
	return resolveAbs(absolute(p), 0)
}

// maxLinks bounds the dangling symlinks followed by one resolve.
const maxLinks = 40

func resolveAbs(abs string, links int) (string, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	sep := string(filepath.Separator)
	if t := strings.TrimRight(abs, sep); t != "" {
		abs = t
	}
	dir, base := filepath.Split(abs)
	if t := strings.TrimRight(dir, sep); t != "" {
		dir = t
	}
	if base == "" || base == "." || base == ".." || dir == "" {
		return "", err
	}
	parent, perr := resolveAbs(dir, links)
	if perr != nil {
		return "", perr
	}
	leaf := filepath.Join(parent, base)
	fi, lerr := os.Lstat(leaf)
	if lerr != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return leaf, nil
	}
	if links >= maxLinks {
		return "", fmt.Errorf("too many links resolving %s", abs)
	}
	target, rerr := os.Readlink(leaf)
	if rerr != nil {
		return "", rerr
	}
	if !filepath.IsAbs(target) {
		target = parent + sep + target
	}
	return resolveAbs(target, links+1)
}

// within reports whether path is root or inside it; both are resolved.
func within(path, root string) bool {
	if path == root {
		return true
	}
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(path, root)
}

// extension returns the lower-case extension of a base name, without the
// dot: "" when there is no dot or it ends the name; ".env" has "env".
func extension(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return ""
	}
	return strings.ToLower(name[i+1:])
}

func hasExt(list []string, ext string) bool {
	for _, e := range list {
		if strings.ToLower(strings.TrimPrefix(e, ".")) == ext {
			return true
		}
	}
	return false
}
