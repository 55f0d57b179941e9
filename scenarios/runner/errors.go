package runner

import (
	"fmt"
	"strings"
)

// Error is one problem in a lab file, located by step and field.
type Error struct {
	File  string
	Step  int    // 1-based; 0 when the problem is outside the steps
	Name  string // the step's name
	Field string // path such as spec.steps[0].checks[1].distribution.tolerance
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Step > 0 {
		fmt.Fprintf(&b, ": step %d", e.Step)
		if e.Name != "" {
			fmt.Fprintf(&b, " (%s)", e.Name)
		}
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	return b.String() + ": " + e.Msg
}

// ErrorList holds every problem found in a lab file.
type ErrorList []*Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// problems collects errors for one file (and step).
type problems struct {
	file string
	step int
	name string
	list *ErrorList
}

func (p problems) addf(field, format string, args ...any) {
	*p.list = append(*p.list, &Error{File: p.file, Step: p.step, Name: p.name, Field: field, Msg: fmt.Sprintf(format, args...)})
}
