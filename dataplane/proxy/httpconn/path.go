package httpconn

import (
	"strings"
)

// EscapedSlashes is the HCM's path_with_escaped_slashes_action.
type EscapedSlashes int

// Actions on %2F, %2f, %5C and %5c in the path, as Envoy's enum
// (IMPLEMENTATION_SPECIFIC_DEFAULT is KEEP_UNCHANGED in Envoy).
const (
	EscapedSlashesKeep EscapedSlashes = iota
	EscapedSlashesReject
	EscapedSlashesRedirect
	EscapedSlashesUnescape
)

// PathNormalization is what the HCM does to :path before routing (Envoy's
// ConnectionManagerUtility::maybeNormalizePath): escaped slashes first, then RFC 3986
// normalization (normalize_path), then merge_slashes. The zero value changes nothing.
type PathNormalization struct {
	Normalize      bool
	MergeSlashes   bool
	EscapedSlashes EscapedSlashes
}

// active reports whether the normalization can change a path.
func (n PathNormalization) active() bool {
	return n.Normalize || n.MergeSlashes || n.EscapedSlashes != EscapedSlashesKeep
}

// pathResult is the outcome of normalizing one request path.
type pathResult int

const (
	pathContinue pathResult = iota // the path (possibly changed) is routed
	pathReject                     // 400, as Envoy's "path_normalization_failed"
	pathRedirect                   // the unescaped path is sent back as a redirect
)

// apply returns the normalized request target (path and query) and what to do with it.
func (n PathNormalization) apply(target string) (string, pathResult) {
	orig, query, hasQuery := strings.Cut(target, "?")
	path, res := orig, pathContinue
	if n.EscapedSlashes != EscapedSlashesKeep && hasEscapedSlash(path) {
		switch n.EscapedSlashes {
		case EscapedSlashesReject:
			return target, pathReject
		case EscapedSlashesRedirect:
			res = pathRedirect
		}
		path = unescapeSlashes(path)
	}
	if n.Normalize {
		p, ok := normalizePath(path)
		if !ok {
			return target, pathReject
		}
		path = p
	}
	if n.MergeSlashes {
		path = mergeSlashes(path)
	}
	if path == orig {
		return target, res // unchanged: no new string for the target
	}
	if hasQuery {
		path += "?" + query
	}
	return path, res
}

func hasEscapedSlash(p string) bool {
	for i := 0; i+2 < len(p); i++ {
		if p[i] == '%' && ((p[i+1] == '2' && (p[i+2] == 'F' || p[i+2] == 'f')) || (p[i+1] == '5' && (p[i+2] == 'C' || p[i+2] == 'c'))) {
			return true
		}
	}
	return false
}

func unescapeSlashes(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			switch {
			case p[i+1] == '2' && (p[i+2] == 'F' || p[i+2] == 'f'):
				b.WriteByte('/')
				i += 2
				continue
			case p[i+1] == '5' && (p[i+2] == 'C' || p[i+2] == 'c'):
				b.WriteByte('\\')
				i += 2
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// normalizePath is RFC 3986 section 6 normalization as Envoy's canonicalizer does it:
// backslashes become slashes, "." and ".." segments are removed (".." never climbs above
// the root), percent-encoded unreserved characters are decoded and other escapes get
// upper-case hex. A path that does not start with "/" fails.
func normalizePath(p string) (string, bool) {
	if isNormal(p) {
		return p, true // most requests: nothing to decode or remove, nothing allocated
	}
	return canonicalizePath(p)
}

// isNormal reports whether normalizePath leaves p as it is: absolute, no backslash, no
// escape, no "." or ".." segment.
func isNormal(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.IndexByte(p, '\\') >= 0 || strings.IndexByte(p, '%') >= 0 {
		return false
	}
	for rest := p[1:]; ; {
		seg, after, more := strings.Cut(rest, "/")
		if seg == "." || seg == ".." {
			return false
		}
		if !more {
			return true
		}
		rest = after
	}
}

// canonicalizePath is normalizePath's work on a path that needs it.
func canonicalizePath(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, `\`) {
		return p, false
	}
	var dec strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			dec.WriteByte('/')
		case c == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]):
			v := unhex(p[i+1])<<4 | unhex(p[i+2])
			if isUnreserved(v) {
				dec.WriteByte(v)
			} else {
				dec.WriteByte('%')
				dec.WriteByte(upper(p[i+1]))
				dec.WriteByte(upper(p[i+2]))
			}
			i += 2
		default:
			dec.WriteByte(c)
		}
	}
	segs := strings.Split(dec.String()[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/"), true
}

func mergeSlashes(p string) string {
	if !strings.Contains(p, "//") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i > 0 && p[i-1] == '/' {
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}

func isUnreserved(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~'
}
