package fidelity

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/scenarios/runner"
)

// loadScenario loads a shipped scenario with meshlab's own loaders. A lab file
// (scenarios/labs/*.yaml) is measured in the state its steps leave the mesh in: its
// scenario with every step's apply and delete actions, then its solution's, applied in
// order, as a learner who finished it has it.
func loadScenario(path string) (*config.Scenario, error) {
	if filepath.Base(filepath.Dir(path)) != "labs" {
		return config.LoadFile(path)
	}
	l, err := runner.Load(path)
	if err != nil {
		return nil, fmt.Errorf("load lab %s: %w", path, err)
	}
	sc, err := config.Load(l.ScenarioFile, l.ScenarioData)
	if err != nil {
		return nil, fmt.Errorf("load the scenario of lab %s: %w", path, err)
	}
	for i, st := range l.Steps {
		for _, a := range append(append([]runner.Action(nil), st.Actions...), st.Solution...) {
			if sc, err = applyAction(sc, a, filepath.Dir(path)); err != nil {
				return nil, fmt.Errorf("lab %s step %d (%s): %w", path, i+1, st.Name, err)
			}
		}
	}
	return sc, nil
}

// applyAction applies one lab action that changes objects; other actions change nothing.
func applyAction(sc *config.Scenario, a runner.Action, dir string) (*config.Scenario, error) {
	switch {
	case a.Apply != nil:
		data := bytes.Join(toBytes(a.Apply.Objects), []byte("\n---\n"))
		if a.Apply.File != "" {
			f := a.Apply.File
			if !filepath.IsAbs(f) {
				f = filepath.Join(dir, f)
			}
			var err error
			if data, err = os.ReadFile(f); err != nil {
				return nil, fmt.Errorf("read apply file: %w", err)
			}
		}
		next, _, err := sc.Apply(config.File{Name: "apply", Data: data})
		if err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		return next, nil
	case a.Delete != nil:
		refs := make([]config.Ref, 0, len(a.Delete.Objects))
		for _, o := range a.Delete.Objects {
			ns := o.Namespace
			if ns == "" {
				ns = "default"
			}
			refs = append(refs, config.Ref{Kind: o.Kind, Namespace: ns, Name: o.Name})
		}
		next, _, err := sc.Delete(refs...)
		if err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
		return next, nil
	}
	return sc, nil
}

func toBytes[T ~[]byte](l []T) [][]byte {
	out := make([][]byte, len(l))
	for i, b := range l {
		out[i] = b
	}
	return out
}
