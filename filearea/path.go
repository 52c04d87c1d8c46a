package filearea

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/baton-engine/baton"
)

// Path limits.
const (
	MaxPathBytes = 1024 // a whole normalized path
	MaxNameBytes = 255  // one component
)

// Clean returns the normalized form of the file path p, or an
// ECodeBadRequest error saying why p is not acceptable (see the package
// comment for the rules). The empty path is refused; use CleanDir where
// the root is allowed.
func Clean(p string) (string, error) {
	c, err := CleanDir(p)
	if err == nil && c == "" {
		return "", baton.Errorf(baton.ECodeBadRequest, "invalid path: empty")
	}
	return c, err
}

// CleanDir is Clean for a directory, where "" (or "/"-free emptiness such
// as "." or "") names the root.
func CleanDir(p string) (string, error) {
	bad := func(why string) error { return baton.Errorf(baton.ECodeBadRequest, "invalid path: %s", why) }
	// Bound the work before looking closely: a normalized path is at most
	// MaxPathBytes, and normalization removes at most "./" pairs and slashes.
	if len(p) > 4*MaxPathBytes {
		return "", bad("too long")
	}
	if strings.HasPrefix(p, "/") {
		return "", bad("must be relative")
	}
	if !utf8.ValidString(p) {
		return "", bad("not valid UTF-8")
	}
	for _, r := range p {
		switch {
		case r == 0:
			return "", bad("contains NUL")
		case r < 0x20 || r == 0x7f:
			return "", bad("contains a control character")
		case r == '\\':
			return "", bad(`contains a backslash`)
		}
	}
	dirty := false // some component is dropped: the result differs from p
	for name := range strings.SplitSeq(p, "/") {
		switch name {
		case "", ".":
			dirty = true
		case "..":
			return "", bad(`contains ".."`)
		default:
			if len(name) > MaxNameBytes {
				return "", bad("a component is longer than 255 bytes")
			}
		}
	}
	if dirty {
		kept := strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
		kept = slices.DeleteFunc(kept, func(name string) bool { return name == "." })
		p = strings.Join(kept, "/")
	}
	if len(p) > MaxPathBytes {
		return "", bad("longer than 1024 bytes")
	}
	return p, nil
}

// Join joins a cleaned directory and a cleaned relative path.
func Join(dir, p string) string {
	switch {
	case dir == "":
		return p
	case p == "":
		return dir
	}
	return dir + "/" + p
}

// Rel returns p relative to the cleaned directory dir, and false when p
// is not below dir (or is dir itself).
func Rel(dir, p string) (string, bool) {
	if dir == "" {
		return p, p != ""
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	if !ok || rest == "" {
		return "", false
	}
	return rest, true
}

// Ancestors returns the directories above the cleaned path p, nearest
// last: "a/b/c" has "a" and "a/b".
func Ancestors(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// DirRange returns the half-open byte range [lo, hi) that holds exactly
// the paths below the non-empty cleaned directory dir: every such path
// starts with dir+"/", and '0' is the byte after '/'. (Every path is below
// the root; it needs no range.)
func DirRange(dir string) (lo, hi string) {
	return dir + "/", dir + "0"
}
