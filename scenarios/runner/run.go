package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

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

// appListenTimeout bounds RunLab's wait for the apps to listen on their container ports.
const appListenTimeout = 15 * time.Second

// RunOptions configure RunLab.
type RunOptions struct {
	Lab    *Lab        // required
	Up     lab.Options // required: Name, Logger (the scenario is the lab's)
	Runner Runner      // Out and Logger; Backend is set by RunLab
	// JUnit is a file the steps' JUnit XML report is written to once any step ran
	// (optional; "" writes none).
	JUnit string
}

// RunLab brings the lab up in this process, runs every step and tears it down. Its
// error says why the lab could not start or stop, else which steps failed (Report.Err).
func RunLab(ctx context.Context, o RunOptions) (Report, error) {
	o.Up.ScenarioFile, o.Up.ScenarioData = o.Lab.ScenarioFile, o.Lab.ScenarioData
	l, err := lab.Start(ctx, o.Up)
	if err != nil {
		return Report{}, fmt.Errorf("start lab %s: %w", o.Lab.Name, err)
	}
	r := o.Runner
	r.Backend = NewLabBackend(l, o.Up.RunRoot, o.Up.Name)
	// The steps' traffic must find the apps listening, not only started (lab/applisten.go);
	// one that never listens is said and the steps run anyway: their checks say the rest.
	wctx, cancel := context.WithTimeout(ctx, appListenTimeout)
	waitStart := time.Now()
	if err := lab.WaitAppsListening(wctx, l); err != nil {
		r.printf("warning: %v\n", err)
	} else if r.Logger != nil {
		r.Logger.Info("apps listening", "waited", time.Since(waitStart).Round(time.Microsecond))
	}
	cancel()
	rep := r.Run(ctx, o.Lab)
	err = l.Close()
	if err != nil {
		err = fmt.Errorf("stop lab %s: %w", o.Lab.Name, err)
	}
	if o.JUnit != "" && len(rep.Steps) > 0 {
		if jerr := writeJUnitFile(o.JUnit, rep); jerr != nil {
			return rep, jerr
		}
	}
	if err != nil {
		return rep, err
	}
	return rep, rep.Err()
}

// writeJUnitFile writes rep's JUnit XML to path.
func writeJUnitFile(path string, rep Report) error {
	w, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if err := WriteJUnit(w, rep); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}
