package filearea

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func TestClean(t *testing.T) {
	long := strings.Repeat("a", MaxNameBytes)
	tests := []struct {
		in, want string
		err      string // message fragment; "" means valid
	}{
		{in: "a.txt", want: "a.txt"},
		{in: "dir/sub/file", want: "dir/sub/file"},
		{in: "dir//sub/./file/", want: "dir/sub/file"},
		{in: "./a", want: "a"},
		{in: ".hidden/..x/x..", want: ".hidden/..x/x.."},
		{in: "ünï/čödé 1.md", want: "ünï/čödé 1.md"},
		{in: long, want: long},
		{in: "", err: "empty"},
		{in: ".", err: "empty"},
		{in: "./", err: "empty"},
		{in: "/etc/passwd", err: "must be relative"},
		{in: "..", err: `".."`},
		{in: "a/../b", err: `".."`},
		{in: "a/..", err: `".."`},
		{in: "a\x00b", err: "NUL"},
		{in: "a\nb", err: "control"},
		{in: "a\x7fb", err: "control"},
		{in: `a\..\b`, err: "backslash"},
		{in: "a\xffb", err: "UTF-8"},
		{in: long + "a", err: "255"},
		{in: strings.Repeat("abcd/", 206), err: "1024"},
		{in: strings.Repeat("/", 5000), err: "too long"},
	}
	for _, tt := range tests {
		got, err := Clean(tt.in)
		if tt.err == "" {
			if err != nil || got != tt.want {
				t.Errorf("Clean(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || baton.ErrorCode(err) != baton.ECodeBadRequest || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Clean(%q) = %q, %v; want a bad_request error about %s", tt.in, got, err, tt.err)
		}
	}
	for _, root := range []string{"", ".", "/"[1:], "./"} {
		if got, err := CleanDir(root); err != nil || got != "" {
			t.Errorf("CleanDir(%q) = %q, %v; want the root", root, got, err)
		}
	}
}

func TestPathHelpers(t *testing.T) {
	if diff := cmp.Diff([]string{"a", "a/b"}, Ancestors("a/b/c")); diff != "" {
		t.Errorf("Ancestors (-want +got):\n%s", diff)
	}
	if got := Ancestors("top"); got != nil {
		t.Errorf("Ancestors(top) = %q", got)
	}
	for _, tt := range []struct{ dir, p, want string }{{"", "a", "a"}, {"a", "", "a"}, {"a", "b/c", "a/b/c"}} {
		if got := Join(tt.dir, tt.p); got != tt.want {
			t.Errorf("Join(%q, %q) = %q", tt.dir, tt.p, got)
		}
	}
	for _, tt := range []struct {
		dir, p, want string
		ok           bool
	}{{"", "a/b", "a/b", true}, {"a", "a/b", "b", true}, {"a", "a", "", false}, {"a", "ab/c", "", false}, {"", "", "", false}} {
		if got, ok := Rel(tt.dir, tt.p); got != tt.want || ok != tt.ok {
			t.Errorf("Rel(%q, %q) = %q, %v", tt.dir, tt.p, got, ok)
		}
	}
	lo, hi := DirRange("a/b")
	for _, p := range []string{"a/b/c", "a/b/\U0010FFFF", "a/b/ " /* below '0' */} {
		if p < lo || p >= hi {
			t.Errorf("%q is below a/b but outside [%q, %q)", p, lo, hi)
		}
	}
	for _, p := range []string{"a/b", "a/b0", "a/b.c", "a/b-c/d", "a/c"} {
		if p >= lo && p < hi {
			t.Errorf("%q is not below a/b but inside [%q, %q)", p, lo, hi)
		}
	}
}

// FuzzClean checks the normalizer's promises on any input: a result is
// accepted again unchanged, and never escapes the area or smuggles in a
// byte the rules forbid.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"a", "a/b", "./a//b/", "../x", "a/../../b", "/abs", "a\x00", "a\\b", "ü/ö", "....", ".../a", "a/./.", strings.Repeat("x/", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := CleanDir(in)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeBadRequest {
				t.Fatalf("CleanDir(%q): error %v is not bad_request", in, err)
			}
			return
		}
		if again, err := CleanDir(got); err != nil || again != got {
			t.Fatalf("CleanDir is not idempotent on %q: %q, %v", got, again, err)
		}
		if len(got) > MaxPathBytes || !utf8.ValidString(got) || strings.HasPrefix(got, "/") || strings.HasSuffix(got, "/") {
			t.Fatalf("CleanDir(%q) = %q breaks a rule", in, got)
		}
		if strings.ContainsAny(got, "\x00\\") {
			t.Fatalf("CleanDir(%q) = %q has a forbidden byte", in, got)
		}
		for name := range strings.SplitSeq(got, "/") {
			if got != "" && (name == "" || name == "." || name == ".." || len(name) > MaxNameBytes) {
				t.Fatalf("CleanDir(%q) = %q has component %q", in, got, name)
			}
		}
	})
}

// BenchmarkClean measures the normalizer every file request runs, on a
// path that is clean already (the common case) and on one it rewrites.
func BenchmarkClean(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"clean", "src/pkg/internal/file_test.go"},
		{"messy", "src/pkg/./internal//file_test.go/"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Clean(c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
