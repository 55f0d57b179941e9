package lab

import (
	"context"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab/faults"
	"github.com/meshlab/meshlab/web"
)

// The lab's machinery faults are lab/faults', acting on the lab through below (deps.go).
var _ web.FaultBackend = (*Lab)(nil)

// faultDeps is what the faults act on: the lab, its discovery server and its pods'
// processes.
func (l *Lab) faultDeps() faults.Deps {
	return faults.Deps{Lab: l.below(), Discovery: l.disc, Procs: l.below(), Log: l.log}
}

// Faults implements web.FaultBackend: the faults in force.
func (l *Lab) Faults() []api.Fault { return l.faults.List() }

// AddFault implements web.FaultBackend: spec checked and put in force.
func (l *Lab) AddFault(ctx context.Context, spec api.FaultSpec) (api.Fault, error) {
	return l.faults.Add(ctx, l.faultDeps(), spec)
}

// ClearFaults implements web.FaultBackend: the fault id, or every fault when id is "",
// undone.
func (l *Lab) ClearFaults(ctx context.Context, id string) ([]api.Fault, error) {
	return l.faults.Clear(ctx, l.faultDeps(), id)
}
