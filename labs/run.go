package labs

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios"
)

// Load reads a lab by file path, else by the name of a bundled lab.
func Load(ref string) (*Lab, error) {
	data, err := os.ReadFile(ref)
	file := ref
	if errors.Is(err, os.ErrNotExist) {
		data, file, err = scenarios.LookupLab(ref)
		if err != nil {
			return nil, fmt.Errorf("lab %q is neither a file nor a bundled lab: %w", ref, err)
		}
		return Parse(file, data, Sources{Scenario: scenarios.Lookup, Dir: "."})
	}
	if err != nil {
		return nil, fmt.Errorf("read lab: %w", err)
	}
	return Parse(file, data, Sources{Scenario: scenarios.Lookup})
}

// RunOptions configure RunLab.
type RunOptions struct {
	Lab    *Lab        // required
	Up     lab.Options // required: Name, Logger (the scenario is the lab's)
	Runner Runner      // Out and Logger; Backend is set by RunLab
}

// RunLab brings the lab up in this process, runs every step and tears it down.
func RunLab(ctx context.Context, o RunOptions) (Report, error) {
	o.Up.ScenarioFile, o.Up.ScenarioData = o.Lab.ScenarioFile, o.Lab.ScenarioData
	l, err := lab.Start(ctx, o.Up)
	if err != nil {
		return Report{}, fmt.Errorf("start lab %s: %w", o.Lab.Name, err)
	}
	r := o.Runner
	r.Backend = NewLabBackend(l, o.Up.RunRoot, o.Up.Name)
	rep := r.Run(ctx, o.Lab)
	if err := l.Close(); err != nil {
		return rep, fmt.Errorf("stop lab %s: %w", o.Lab.Name, err)
	}
	return rep, nil
}
