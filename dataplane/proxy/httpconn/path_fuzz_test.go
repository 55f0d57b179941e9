package httpconn

import (
	"strings"
	"testing"
)

// FuzzPathNormalization feeds request targets to the HCM's path normalization with
// every option on: it never panics, a routed path starts with "/" and has no "." or ".."
// segment or "//", and normalizing an escape-free result again changes nothing.
func FuzzPathNormalization(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", "/a/./b/", "//x///y", "/%2e%2E/", "/a%2Fb%5c", `\a\b`, "/a?x=/../", "/..", "/%zz", "/%", "x"} {
		f.Add(s)
	}
	n := PathNormalization{Normalize: true, MergeSlashes: true, EscapedSlashes: EscapedSlashesUnescape}
	f.Fuzz(func(t *testing.T, target string) {
		got, res := n.apply(target)
		if res != pathContinue {
			return
		}
		path, _, _ := strings.Cut(got, "?")
		if !strings.HasPrefix(path, "/") {
			t.Fatalf("%q normalized to %q, not absolute", target, got)
		}
		if strings.Contains(path, "//") {
			t.Fatalf("%q normalized to %q with an empty segment", target, got)
		}
		for _, seg := range strings.Split(path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q normalized to %q with a dot segment", target, got)
			}
		}
		// Decoding is one pass, as Envoy's: an escape formed by decoding ("/%%370" ->
		// "/%70") is decoded only by a second pass, so only escape-free results must be
		// fixed points.
		if again, _ := n.apply(got); !strings.Contains(got, "%") && again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", target, got, again)
		}
	})
}

// FuzzNormalPathFastPath: the fast path (a path with nothing to normalize is returned as
// it is) agrees with the full canonicalization on every input.
func FuzzNormalPathFastPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "/a/./b", "/a/../b", "/.", "/..", "/a/.", "/a/..", "/.a/..b/", "//x", `/a\b`, "/a%2e", "/%41", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, ok := normalizePath(p)
		want, wantOK := canonicalizePath(p)
		if got != want || ok != wantOK {
			t.Fatalf("normalizePath(%q) = %q, %v; canonicalization gives %q, %v", p, got, ok, want, wantOK)
		}
	})
}
