package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
)

// checkSyncTimeout bounds how long a check waits for the proxies to take the config the
// attendee just applied before it sends its traffic: well above Envoy's 30 s cap on its xDS
// reconnect backoff, so proxies coming back after a control-plane outage are waited for.
const checkSyncTimeout = 45 * time.Second

// Guide walks a person through a lab one step at a time (`meshlab lab start`): it runs
// each step's actions when the step begins (the stage, never the answer: a background
// load keeps running while the person works), and on each check it sends the step's
// verify traffic afresh before judging. It is the lab's guide backend (lab.Options.Guide,
// served by the web package, which this package does not import); its methods run one at
// a time.
type Guide struct {
	mu     sync.Mutex
	lab    *Lab
	runner *Runner // Backend set by Begin
	step   int
	state  *stepState
	err    string // the current step's actions failed
	passed []bool // by step: a check passed
	// stepCtx outlives the request that began the step: a load the step's actions
	// started runs in it until the step ends (or guidedLoadMax passes).
	stepCtx context.Context
	cancel  context.CancelFunc
}

// NewGuide returns a guide for l whose runner is r; it answers ErrNoGuide until Begin.
func NewGuide(l *Lab, r Runner) *Guide {
	return &Guide{lab: l, runner: &r, passed: make([]bool, len(l.Steps))}
}

// Begin attaches the running lab and runs the first step's actions.
func (g *Guide) Begin(ctx context.Context, b Backend) api.GuideState {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runner.Backend = b
	g.enter(ctx, 0)
	return g.stateLocked()
}

// Close stops what the current step left running (its background load).
func (g *Guide) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endStep()
}

func (g *Guide) endStep() {
	if g.state != nil {
		g.stopLoad()
	}
	if g.cancel != nil {
		g.cancel()
	}
}

// enter makes step i current and runs its actions.
func (g *Guide) enter(ctx context.Context, i int) {
	g.endStep()
	g.stepCtx, g.cancel = context.WithTimeout(context.WithoutCancel(ctx), guidedLoadMax)
	g.step, g.err = i, ""
	g.state = g.runner.begin(ctx, g.lab, i)
	if err := g.runner.runActions(g.stepCtx, g.lab, g.lab.Steps[i].Actions, g.state); err != nil {
		g.stopLoad()
		g.err = err.Error()
	}
}

func (g *Guide) stopLoad() {
	if g.state.loadStop != nil {
		g.state.loadStop()
	}
}

// Guide answers the guide API.
func (g *Guide) Guide() (api.GuideState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return api.GuideState{}, api.ErrNoGuide
	}
	return g.stateLocked(), nil
}

func (g *Guide) stateLocked() api.GuideState {
	st := g.lab.Steps[g.step]
	passed := 0
	for _, p := range g.passed {
		if p {
			passed++
		}
	}
	return api.GuideState{
		Lab: g.lab.Name, Title: g.lab.Title, Introduction: g.lab.Introduction,
		Step: g.step + 1, Steps: len(g.lab.Steps), StepName: st.Name, Instructions: instructions(g.lab, g.step),
		Tasks: Tasks(g.lab, g.step), Error: g.err, Passed: passed, Done: g.passed[len(g.passed)-1],
	}
}

// CheckStep answers the guide API: it waits for the proxies to take the current
// config, sends the step's verify traffic afresh and judges the step.
func (g *Guide) CheckStep(ctx context.Context) (api.GuideCheck, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return api.GuideCheck{}, api.ErrNoGuide
	}
	return g.checkLocked(ctx, ""), nil
}

func (g *Guide) checkLocked(ctx context.Context, actionErr string) api.GuideCheck {
	// The load ran while the person worked: its totals are what no-failures judges.
	g.stopLoad()
	st := g.state
	st.traffic, st.byPod = nil, nil
	out := api.GuideCheck{Step: g.step + 1, Error: actionErr}
	if out.Error == "" && g.err != "" {
		out.Error = "the step's setup failed: " + g.err
	}
	if out.Error == "" {
		r := *g.runner
		r.SyncTimeout = checkSyncTimeout
		if err := r.waitSynced(ctx); err != nil {
			r.Logger.Info("checking a step whose proxies are not all synced", "err", err)
		}
		if err := g.runner.verify(ctx, g.lab, g.step, st); err != nil {
			out.Error = err.Error()
		}
	}
	out.Passed = out.Error == ""
	if out.Error == "" {
		for _, r := range g.runner.Check(ctx, g.lab, g.step, st) {
			out.Results = append(out.Results, api.CheckResult{Check: r.Check, Passed: r.Passed, Saw: r.Saw, Want: r.Want, Hint: r.Hint})
			out.Passed = out.Passed && r.Passed
		}
	}
	// Measure again from now, for the next check.
	if st.load0 != nil && g.stepCtx.Err() == nil {
		st.loadStop = g.runner.startLoad(g.stepCtx, *st.load0, st)
	}
	if out.Passed {
		g.passed[g.step] = true
		out.Done = g.step == len(g.lab.Steps)-1
	}
	return out
}

// NextStep answers the guide API. On the last step it moves nowhere: once that
// step passed it answers the state, Done; before, ErrLastStep saying what is left.
func (g *Guide) NextStep(ctx context.Context) (api.GuideState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return api.GuideState{}, api.ErrNoGuide
	}
	switch {
	case g.step+1 < len(g.lab.Steps):
		g.enter(ctx, g.step+1)
	case !g.passed[g.step]:
		return api.GuideState{}, fmt.Errorf("%w: step %d (%s) has not passed yet: do its task, then meshlab lab check", api.ErrLastStep, g.step+1, g.lab.Steps[g.step].Name)
	}
	return g.stateLocked(), nil
}

// SolveStep answers the guide API: it runs the step's solution, then checks the
// step as CheckStep does. A step without a solution answers ErrNoSolution.
func (g *Guide) SolveStep(ctx context.Context) (api.GuideCheck, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runner.Backend == nil {
		return api.GuideCheck{}, api.ErrNoGuide
	}
	if len(g.lab.Steps[g.step].Solution) == 0 {
		return api.GuideCheck{}, fmt.Errorf("step %d (%s): %w: do what its instructions say, then meshlab lab check", g.step+1, g.lab.Steps[g.step].Name, api.ErrNoSolution)
	}
	msg := ""
	if err := g.runner.runActions(g.stepCtx, g.lab, g.lab.Steps[g.step].Solution, g.state); err != nil {
		msg = "solution: " + err.Error()
	}
	return g.checkLocked(ctx, msg), nil
}
