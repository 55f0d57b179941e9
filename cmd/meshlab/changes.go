package main

import (
	"fmt"
	"io"

	"github.com/meshlab/meshlab/api"
)

// printChanges writes what an apply or delete changed as text (one line a change, as
// kubectl words it), JSON or YAML (the API's typed changes).
func printChanges(w io.Writer, format string, changes []api.Change) error {
	if changes == nil {
		changes = []api.Change{} // -o json prints [], not null
	}
	return printOutput(w, format, changes, func(w io.Writer) error {
		for _, c := range changes {
			if _, err := fmt.Fprintln(w, c); err != nil {
				return err
			}
		}
		return nil
	})
}
