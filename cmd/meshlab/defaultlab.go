package main

import (
	"fmt"
	"strings"

	"github.com/meshlab/meshlab/lab"
)

// defaultLab is the lab a verb acts on when neither --lab nor --name names one: the only
// lab that user uid started (its record's creator; a record too old to name one counts
// as anyone's). It never picks among several, and never another user's lab: then the
// error lists the labs present with their state and says how to choose.
func defaultLab(runRoot string, uid uint32) (string, error) {
	names, err := lab.Known(runRoot)
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", lab.ErrNoLab
	}
	var mine, others []string
	for _, n := range names {
		r, err := lab.ReadRecord(lab.PathsFor(runRoot, n))
		switch {
		case err != nil:
			// A run directory without a readable record: a lab still starting, or the
			// remains of one that crashed early. It is someone's; list it as such.
			others = append(others, n+" (no record)")
		case r.CreatorUID == nil || *r.CreatorUID == uid:
			mine = append(mine, n)
		default:
			others = append(others, fmt.Sprintf("%s (user %d)", n, *r.CreatorUID))
		}
	}
	switch {
	case len(mine) == 1:
		return mine[0], nil
	case len(mine) > 1:
		return "", fmt.Errorf("several labs of yours are present: %s; choose one with --lab NAME", labStates(runRoot, mine))
	}
	return "", fmt.Errorf("no lab of yours is present (other labs: %s); choose one with --lab NAME, or start one with: sudo meshlab up", strings.Join(others, ", "))
}

// labStates lists labs as "a (running), b (stopped: remove it with meshlab clean --lab b)".
func labStates(runRoot string, names []string) string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if lab.Running(lab.PathsFor(runRoot, n)) {
			out = append(out, n+" (running)")
		} else {
			out = append(out, n+" (stopped: remove it with meshlab clean --lab "+n+")")
		}
	}
	return strings.Join(out, ", ")
}
