package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Limits on input. Whatever arrives (a scenario at `up`, files at `apply`) is measured
// against them before it is decoded further, so that one careless or hostile file cannot
// take the lab's memory or its proxies' config channel: a 10 MB VirtualService of 127,000
// routes once made every proxy drop its xDS stream and kept the lab at 2.8 GB.
const (
	// MaxFileBytes is the largest file Load or Apply reads.
	MaxFileBytes = 16 << 20
	// MaxObjectBytes is the largest object, as written and as JSON after YAML aliases
	// are expanded: Kubernetes' own limit (etcd's default request size, 1.5 MiB).
	MaxObjectBytes = 3 << 19
	// MaxTotalBytes is the most all of a lab's objects may weigh together (as JSON).
	MaxTotalBytes = 32 << 20
	// MaxDocuments is the most YAML documents one file may hold.
	MaxDocuments = 10000
	// MaxDepth is the deepest nesting of mappings and lists in an object; Istio's and
	// Kubernetes' schemas need fewer than 20 levels.
	MaxDepth = 64
	// MaxListItems is the longest list any field may hold, unless listLimits says less.
	MaxListItems = 4096
	// MaxRoutes is the most routes (spec.http, spec.tcp and spec.tls together) one
	// VirtualService may hold.
	MaxRoutes = 4096
	// MaxErrors is the most problems reported for one load or apply; the rest are
	// counted in a last line.
	MaxErrors = 100
)

// listLimits are tighter bounds on particular lists, by field path with indexes
// replaced by "[]".
var listLimits = map[string]int{
	"spec.hosts":        1024,
	"spec.gateways":     1024,
	"spec.http[].match": 256,
	"spec.http[].route": 256,
	"spec.tcp[].match":  256,
	"spec.tls[].match":  256,
	"spec.rules":        1024,
	"spec.subsets":      1024,
	"spec.exportTo":     64,
}

// checkFileSize records a problem when a file is too large to read.
func checkFileSize(file string, data []byte, errs *ErrorList) bool {
	if len(data) <= MaxFileBytes {
		return true
	}
	*errs = append(*errs, &Error{Origin: originOfFile(file), Doc: 1,
		Msg: fmt.Sprintf("the file is %s, above the limit of %s for one file", sizeString(len(data)), sizeString(MaxFileBytes))})
	return false
}

// checkDocumentCount records a problem when a file holds too many documents.
func checkDocumentCount(file string, n int, errs *ErrorList) bool {
	if n <= MaxDocuments {
		return true
	}
	*errs = append(*errs, &Error{Origin: originOfFile(file), Doc: MaxDocuments + 1,
		Msg: fmt.Sprintf("the file holds %d YAML documents, above the limit of %d", n, MaxDocuments)})
	return false
}

// checkDocumentSize records a problem when a document is above MaxObjectBytes, before it
// is parsed: its kind, name and largest field are found by scanning its lines, so that
// the message names them without building the object in memory.
func checkDocumentSize(file string, d document, errs *ErrorList) bool {
	if len(d.data) <= MaxObjectBytes {
		return true
	}
	h := scanHeader(d.data)
	e := &Error{Origin: originOfFile(file), Doc: d.index, Field: h.largestField}
	e.Origin.Kind, e.Origin.Name, e.Origin.Namespace = h.kind, h.name, h.namespace
	if e.Origin.Namespace == "" && e.Origin.Name != "" {
		e.Origin.Namespace = DefaultNamespace
	}
	if h.largestField != "" {
		e.Msg = fmt.Sprintf("%d items (%s) in an object of %s, above the limit of %s for one object (Kubernetes' own): split it into several objects",
			h.largestItems, sizeString(h.largestBytes), sizeString(len(d.data)), sizeString(MaxObjectBytes))
	} else {
		e.Msg = fmt.Sprintf("the object is %s, above the limit of %s for one object (Kubernetes' own): split it into several objects",
			sizeString(len(d.data)), sizeString(MaxObjectBytes))
	}
	*errs = append(*errs, e)
	return false
}

// checkTree records problems of a decoded document: its JSON (aliases expanded) above
// MaxObjectBytes, nesting deeper than MaxDepth, lists longer than their limit, and more
// than MaxRoutes routes in a VirtualService. It reports whether there were none.
func checkTree(js []byte, top map[string]any, kind string, p problems) bool {
	n := len(*p.list)
	if len(js) > MaxObjectBytes {
		p.addf("", "the object expands (YAML anchors and aliases) to %s of JSON, above the limit of %s for one object",
			sizeString(len(js)), sizeString(MaxObjectBytes))
		return false
	}
	if kind == "VirtualService" {
		spec, _ := top["spec"].(map[string]any)
		routes := 0
		for _, f := range []string{"http", "tcp", "tls"} {
			l, _ := spec[f].([]any)
			routes += len(l)
		}
		if routes > MaxRoutes {
			p.addf("spec.http", "%d routes (http, tcp and tls together), above the limit of %d for one VirtualService: split the hosts over several VirtualServices", routes, MaxRoutes)
			return false
		}
	}
	walkLimits(top, "", "", 1, p)
	return len(*p.list) == n
}

// walkLimits checks depth and list lengths below v, at field path (with indexes) and
// pattern (indexes as "[]"). It stops at the first problem of each branch.
func walkLimits(v any, path, pattern string, depth int, p problems) {
	if depth > MaxDepth {
		p.addf(path, "nested %d levels deep, above the limit of %d", depth, MaxDepth)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			walkLimits(c, joinPath(path, k), joinPath(pattern, k), depth+1, p)
		}
	case []any:
		limit, ok := listLimits[pattern]
		if !ok {
			limit = MaxListItems
		}
		if len(x) > limit {
			p.addf(path, "%d items, above the limit of %d for this list", len(x), limit)
			return
		}
		for i, c := range x {
			walkLimits(c, fmt.Sprintf("%s[%d]", path, i), pattern+"[]", depth+1, p)
		}
	}
}

func originOfFile(file string) model.Origin { return model.Origin{File: file} }

// checkTotal records a problem when a scenario's objects weigh more than MaxTotalBytes.
func checkTotal(file string, objects []*Object, errs *ErrorList) bool {
	total := 0
	for _, o := range objects {
		total += len(o.JSON) - o.recordBytes // kubectl apply's record is not the lab's config
	}
	if total <= MaxTotalBytes {
		return true
	}
	*errs = append(*errs, &Error{Origin: originOfFile(file), Doc: 1,
		Msg: fmt.Sprintf("the lab's %d objects would weigh %s together, above the limit of %s for a lab's config", len(objects), sizeString(total), sizeString(MaxTotalBytes))})
	return false
}

// capErrors keeps the first MaxErrors problems and counts the rest in a last one, so
// that a file with a hundred thousand bad routes does not print a hundred thousand lines.
func capErrors(errs ErrorList) ErrorList {
	if len(errs) <= MaxErrors {
		return errs
	}
	last := errs[len(errs)-1]
	out := append(ErrorList(nil), errs[:MaxErrors]...)
	return append(out, &Error{Origin: originOfFile(last.Origin.File), Doc: last.Doc,
		Msg: fmt.Sprintf("and %d more problems (only the first %d are shown)", len(errs)-MaxErrors, MaxErrors)})
}

// headerScan is what scanHeader finds in a document's text.
type headerScan struct {
	kind, name, namespace string
	// largestField is the top-level field, or the field of spec, whose text is the
	// largest ("spec.http"); largestBytes measures it and largestItems counts the
	// entries of its list (0 when it is no block list).
	largestField               string
	largestBytes, largestItems int
}

// scanHeader reads kind, metadata.name and metadata.namespace and finds the largest
// field of a block-style YAML document without parsing it. A flow-style document (JSON)
// yields nothing, and the message names only the document.
func scanHeader(data []byte) headerScan {
	var h headerScan
	var (
		section     string // the top-level key whose block we are in
		childIndent = -1   // the indentation of section's keys
		field       string // the field whose size is being measured
		fieldBytes  int
		fieldItems  int
		itemIndent  = -1 // the indentation of the field's "- " entries
	)
	flush := func() {
		if field != "" && fieldBytes > h.largestBytes {
			h.largestField, h.largestBytes, h.largestItems = field, fieldBytes, fieldItems
		}
		field, fieldBytes, fieldItems, itemIndent = "", 0, 0, -1
	}
	for line := range bytes.Lines(data) {
		trimmed := bytes.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		content := bytes.TrimRight(trimmed, "\r\n")
		k, rest, isKey := bytes.Cut(content, []byte(":"))
		isKey = isKey && len(k) > 0 && !bytes.ContainsAny(k, " #-{[\"'")
		switch {
		case len(bytes.TrimSpace(content)) == 0 || content[0] == '#':
		case indent == 0 && isKey:
			flush()
			section, childIndent = string(k), -1
			field = section
			if section == "kind" {
				h.kind = unquote(rest)
			}
		case section != "" && isKey && (childIndent < 0 || indent == childIndent):
			childIndent = indent
			switch {
			case section == "metadata" && string(k) == "name":
				h.name = unquote(rest)
			case section == "metadata" && string(k) == "namespace":
				h.namespace = unquote(rest)
			case section == "spec":
				flush()
				field = "spec." + string(k)
			}
		}
		if field != "" && len(content) > 0 && content[0] == '-' && (itemIndent < 0 || indent == itemIndent) {
			itemIndent = indent
			fieldItems++
		}
		fieldBytes += len(line)
	}
	flush()
	return h
}

// unquote returns a scalar value as written after "key:", without quotes or comment.
func unquote(v []byte) string {
	s := strings.TrimSpace(string(v))
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return strings.Trim(s, `"'`)
}

// sizeString renders a byte count as people read it: "10.0 MiB", "512 KiB", "900 bytes".
func sizeString(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// ReadLimited reads a file of objects from r, refusing one above MaxFileBytes before
// holding more of it than that; name is used in the message.
func ReadLimited(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read %s: the file is larger than the limit of %s for one file", name, sizeString(MaxFileBytes))
	}
	return data, nil
}

// ReadFileLimited opens and reads path with ReadLimited.
func ReadFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	return ReadLimited(path, f)
}
