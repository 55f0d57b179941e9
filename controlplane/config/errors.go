package config

import (
	"fmt"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Error is one problem found in a scenario file, located by file, object and field.
type Error struct {
	// Origin names the file and, once the document's header was read, the object's kind,
	// namespace and name.
	Origin model.Origin
	// Doc is the 1-based index of the YAML document in the file.
	Doc int
	// Item is the 1-based index of the object in its document's List items (printed
	// 0-based, as items[i]); 0 when the document is not a List.
	Item int
	// Field is the path of the offending field, e.g. "spec.ports[0].port"; empty when the
	// problem concerns the whole document.
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error renders the problem as "file: Kind namespace/name: field: message".
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Item > 0 && e.Origin.Kind != "" && e.Origin.Name != "":
		fmt.Fprintf(&b, "%s: document %d items[%d]: %s %s/%s", e.Origin.File, e.Doc, e.Item-1, e.Origin.Kind, e.Origin.Namespace, e.Origin.Name)
	case e.Item > 0 && e.Origin.Kind != "":
		fmt.Fprintf(&b, "%s: document %d items[%d] (%s)", e.Origin.File, e.Doc, e.Item-1, e.Origin.Kind)
	case e.Item > 0:
		fmt.Fprintf(&b, "%s: document %d items[%d]", e.Origin.File, e.Doc, e.Item-1)
	case e.Origin.Kind != "" && e.Origin.Name != "":
		b.WriteString(e.Origin.String())
	case e.Origin.Kind != "":
		fmt.Fprintf(&b, "%s: document %d (%s)", e.Origin.File, e.Doc, e.Origin.Kind)
	default:
		fmt.Fprintf(&b, "%s: document %d", e.Origin.File, e.Doc)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in a scenario, in file order. Load returns one as its
// error (use errors.As to reach the individual problems).
type ErrorList []*Error

// Error renders one problem per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// problems collects errors for one object while it is validated.
type problems struct {
	origin model.Origin
	doc    int
	item   int
	list   *ErrorList
}

// addf records a problem with field (which may be empty).
func (p problems) addf(field, format string, args ...any) {
	*p.list = append(*p.list, &Error{Origin: p.origin, Doc: p.doc, Item: p.item, Field: field, Msg: fmt.Sprintf(format, args...)})
}
