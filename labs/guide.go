package labs

import (
	"context"
	"sync"

	"github.com/meshlab/meshlab/web"
)

// Guide walks a person through a lab one step at a time (`meshlab lab start`): it runs
// each step's actions when the step begins, checks the step on request, and applies the
// step's solution when asked. It implements web.GuideBackend; its methods run one at a
// time.
type Guide struct {
	mu     sync.Mutex
	lab    *Lab
	runner *Runner // Backend set by Begin
	step   int
	state  *stepState
	err    string // the current step's actions failed
}

var _ web.GuideBackend = (*Guide)(nil)

// NewGuide returns a guide for l whose runner is r; it answers ErrNoGuide until Begin.
func NewGuide(l *Lab, r Runner) *Guide {
	return &Guide{lab: l, runner: &r}
}

// Begin attaches the running lab and runs the first step's actions.
func (g *Guide) Begin(ctx context.Context, b Backend) web.GuideState {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runner.Backend = b
	g.enter(ctx, 0)
	return g.stateLocked()
}

// enter makes step i current and runs its actions.
func (g *Guide) enter(ctx context.Context, i int) {
	g.step, g.state, g.err = i, &stepState{}, ""
	err := g.runner.runActions(ctx, g.lab, g.lab.Steps[i].Actions, g.state)
	g.stopLoad()
	if err != nil {
		g.err = err.Error()
	}
}

func (g *Guide) stopLoad() {
	if g.state.loadStop != nil {
		g.state.loadStop()
	}
}

// Guide implements web.GuideBackend.
func (g *Guide) Guide() (web.GuideState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return web.GuideState{}, web.ErrNoGuide
	}
	return g.stateLocked(), nil
}

func (g *Guide) stateLocked() web.GuideState {
	st := g.lab.Steps[g.step]
	return web.GuideState{
		Lab: g.lab.Name, Title: g.lab.Title, Introduction: g.lab.Introduction,
		Step: g.step + 1, Steps: len(g.lab.Steps), StepName: st.Name, Instructions: st.Instructions, Error: g.err,
	}
}

// CheckStep implements web.GuideBackend.
func (g *Guide) CheckStep(ctx context.Context) (web.GuideCheck, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return web.GuideCheck{}, web.ErrNoGuide
	}
	return g.checkLocked(ctx, ""), nil
}

func (g *Guide) checkLocked(ctx context.Context, actionErr string) web.GuideCheck {
	out := web.GuideCheck{Step: g.step + 1, Error: actionErr, Passed: actionErr == ""}
	for _, r := range g.runner.Check(ctx, g.lab, g.step, g.state) {
		out.Results = append(out.Results, web.CheckResult{Check: r.Check, Passed: r.Passed, Saw: r.Saw, Want: r.Want, Hint: r.Hint})
		out.Passed = out.Passed && r.Passed
	}
	return out
}

// NextStep implements web.GuideBackend.
func (g *Guide) NextStep(ctx context.Context) (web.GuideState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return web.GuideState{}, web.ErrNoGuide
	}
	if g.step+1 >= len(g.lab.Steps) {
		return web.GuideState{}, web.ErrLastStep
	}
	g.enter(ctx, g.step+1)
	return g.stateLocked(), nil
}

// SolveStep implements web.GuideBackend: it runs the step's solution, then its checks.
func (g *Guide) SolveStep(ctx context.Context) (web.GuideCheck, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return web.GuideCheck{}, web.ErrNoGuide
	}
	err := g.runner.runActions(ctx, g.lab, g.lab.Steps[g.step].Solution, g.state)
	g.stopLoad()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return g.checkLocked(ctx, msg), nil
}
