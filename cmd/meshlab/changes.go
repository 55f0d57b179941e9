package main

import (
	"fmt"
	"io"

	"github.com/meshlab/meshlab/api"
)

// printChanges writes what an apply or delete changed as text (one line a change, as
// kubectl words it), JSON or YAML (the API's typed changes). kinds is the lab's list
// (for each kind's API group, as kubectl names resources).
func printChanges(w io.Writer, format string, changes []api.Change, kinds api.Kinds) error {
	if changes == nil {
		changes = []api.Change{} // -o json prints [], not null
	}
	return printOutput(w, format, changes, func(w io.Writer) error {
		for _, c := range changes {
			if _, err := fmt.Fprintln(w, changeLine(c, kinds)); err != nil {
				return err
			}
		}
		return nil
	})
}

// changeLine renders one change as kubectl prints it: `service/details created`,
// `deployment.apps/details-v1 configured`, `virtualservice.networking.istio.io/reviews
// unchanged`; a delete as `service "details" deleted`. The pods an apply or delete made
// or removed (which kubectl does not print: the Deployment controller makes them later)
// keep meshlab's line, `pod NAMESPACE/NAME created|deleted|FAILED: why`.
func changeLine(c api.Change, kinds api.Kinds) string {
	if c.Kind == api.PodKind {
		return c.String()
	}
	k, ok := kinds.Lookup(c.Kind)
	if !ok {
		k = api.Kind{Kind: c.Kind}
	}
	res := k.Resource(false)
	s := res + "/" + c.Name + " " + c.Action
	if c.Action == api.ActionDeleted {
		s = fmt.Sprintf("%s %q deleted", res, c.Name)
	}
	if c.Error != "" {
		s += " with errors: " + c.Error
	}
	return s
}
