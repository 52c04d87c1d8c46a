package main

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/baton-engine/baton/store"
)

// exposure is a data file or directory that users other than its owner
// can reach: the SQLite database holds the key that signs executor, file
// view, model and tools tokens, and the admin key file holds a plaintext
// admin key. Baton creates these private (files 0600, directories 0700)
// but never changes the mode of one that exists; it tells the operator.
type exposure struct {
	path string // absolute
	mode fs.FileMode
	dir  bool
}

// fix is the command that makes the path private.
func (e exposure) fix() string {
	if e.dir {
		return "chmod 700 " + shellQuote(e.path)
	}
	return "chmod 600 " + shellQuote(e.path)
}

func (e exposure) what() string {
	if e.dir {
		return "data directory"
	}
	return "data file"
}

// exposures returns the existing data directory, database files and
// secret files of cfg (plus extra files, such as the dev client key) whose
// mode grants anything to group or others. PostgreSQL has no local files;
// on Windows file modes say nothing about who can read a file.
func exposures(cfg *serveConfig, extra ...string) []exposure {
	if runtime.GOOS == "windows" {
		return nil
	}
	dir, files := store.Files(cfg.storeURL())
	type entry struct {
		path string
		dir  bool
	}
	var paths []entry
	if dir != "" {
		paths = append(paths, entry{dir, true})
	}
	for _, f := range files {
		paths = append(paths, entry{f, false})
	}
	if !cfg.DisableAdminAuth && cfg.AdminKeyFile != "" {
		paths = append(paths, entry{cfg.AdminKeyFile, false})
	}
	for _, f := range extra {
		paths = append(paths, entry{f, false})
	}
	var out []exposure
	seen := map[string]bool{}
	for _, p := range paths {
		abs, err := filepath.Abs(p.path)
		if err != nil || seen[abs] {
			continue
		}
		seen[abs] = true
		st, err := os.Stat(abs)
		if err != nil { // missing: created private when needed
			continue
		}
		if m := st.Mode().Perm(); m&0o077 != 0 {
			out = append(out, exposure{path: abs, mode: m, dir: st.IsDir()})
		}
	}
	return out
}

// warnExposures logs each exposure at WARN, naming the path and the fix.
func warnExposures(log *slog.Logger, es []exposure) {
	for _, e := range es {
		log.Warn(e.what()+" is accessible to other users", "path", e.path,
			"mode", fmt.Sprintf("%04o", e.mode), "fix", e.fix())
	}
}

// printExposures writes each exposure as a `--check` warning line.
func printExposures(w io.Writer, es []exposure) {
	for _, e := range es {
		fmt.Fprintf(w, "warning: %s %s is accessible to other users (mode %04o); fix: %s\n", e.what(), e.path, e.mode, e.fix())
	}
}

// shellQuote quotes s for a POSIX shell unless it needs no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
