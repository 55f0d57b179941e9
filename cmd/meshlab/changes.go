package main

import (
	"fmt"
	"io"
	"strings"
)

// objectChange is one line of `meshlab apply` and `meshlab delete` as -o json|yaml
// print it.
type objectChange struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    string `json:"action"` // created, configured, unchanged or deleted
}

// parseChanges turns the API's change lines ("VirtualService default/reviews
// configured") into objectChanges; a line of another shape keeps its text as Action.
func parseChanges(lines []string) []objectChange {
	out := make([]objectChange, 0, len(lines))
	for _, l := range lines {
		f := strings.Fields(l)
		ns, name, ok := "", "", false
		if len(f) == 3 {
			ns, name, ok = strings.Cut(f[1], "/")
		}
		if !ok {
			out = append(out, objectChange{Action: l})
			continue
		}
		out = append(out, objectChange{Kind: f[0], Namespace: ns, Name: name, Action: f[2]})
	}
	return out
}

// printChanges writes the change lines as text (one a line, as the API words them),
// JSON or YAML.
func printChanges(w io.Writer, format string, lines []string) error {
	return printOutput(w, format, parseChanges(lines), func(w io.Writer) error {
		for _, l := range lines {
			if _, err := fmt.Fprintln(w, l); err != nil {
				return err
			}
		}
		return nil
	})
}
