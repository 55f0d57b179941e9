package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
)

// Runner runs a lab's steps against a running lab.
type Runner struct {
	Backend Backend      // required
	Out     io.Writer    // optional: PASS/FAIL lines
	Logger  *slog.Logger // required
	// SyncTimeout bounds the wait for every proxy to be SYNCED after an apply or
	// delete (optional, 15s).
	SyncTimeout time.Duration
}

// Report is the outcome of a lab run.
type Report struct {
	Lab      string
	Title    string
	Steps    []StepReport
	Duration time.Duration
}

// Passed reports whether every step's actions ran and every check passed.
func (r Report) Passed() bool {
	for _, s := range r.Steps {
		if !s.Passed() {
			return false
		}
	}
	return len(r.Steps) > 0
}

// Err is nil when the lab passed, else an error saying how many steps passed.
func (r Report) Err() error {
	if r.Passed() {
		return nil
	}
	passed := 0
	for _, s := range r.Steps {
		if s.Passed() {
			passed++
		}
	}
	return fmt.Errorf("lab %s failed: %d of %d steps passed (the FAIL lines above say what each check saw and wanted)", r.Lab, passed, len(r.Steps))
}

// StepReport is the outcome of one step.
type StepReport struct {
	Name     string
	Error    string // an action that failed; the checks did not run
	Checks   []Result
	Duration time.Duration
}

// Passed reports whether the step's actions ran and its checks passed.
func (s StepReport) Passed() bool {
	if s.Error != "" {
		return false
	}
	for _, c := range s.Checks {
		if !c.Passed {
			return false
		}
	}
	return true
}

// Run runs every step of l in order; a failed step does not stop the later ones.
func (r *Runner) Run(ctx context.Context, l *Lab) Report {
	start := time.Now()
	rep := Report{Lab: l.Name, Title: l.Title}
	r.printf("Lab %s: %s\n", l.Name, l.Title)
	for i, st := range l.Steps {
		// Unattended, a step's solution runs right after its actions: what a person
		// would do before checking.
		rep.Steps = append(rep.Steps, r.RunStep(ctx, l, i, slices.Concat(st.Actions, st.Solution)))
	}
	rep.Duration = time.Since(start)
	passed := 0
	for _, s := range rep.Steps {
		if s.Passed() {
			passed++
		}
	}
	verdict := "PASS"
	if !rep.Passed() {
		verdict = "FAIL"
	}
	r.printf("%s: %d of %d steps passed in %v\n", verdict, passed, len(rep.Steps), rep.Duration.Round(time.Millisecond))
	return rep
}

// RunStep runs the given actions of step i (its own, or its own and its solution), then
// its verify actions (fresh traffic), then its checks.
func (r *Runner) RunStep(ctx context.Context, l *Lab, i int, actions []Action) StepReport {
	st := l.Steps[i]
	start := time.Now()
	rep := StepReport{Name: st.Name}
	r.printf("\nStep %d: %s\n", i+1, st.Name)
	state := r.begin(ctx, l, i)
	err := r.runActions(ctx, l, actions, state)
	if err == nil {
		err = r.verify(ctx, l, i, state)
	}
	if state.loadStop != nil {
		state.loadStop()
	}
	if err != nil {
		rep.Error = err.Error()
		r.printf("  FAIL %s\n", rep.Error)
		rep.Duration = time.Since(start)
		return rep
	}
	rep.Checks = r.Check(ctx, l, i, state)
	rep.Duration = time.Since(start)
	return rep
}

// begin returns a fresh state for step i, holding what its checks compare against the
// state the step began in.
func (r *Runner) begin(ctx context.Context, l *Lab, i int) *stepState {
	st := &stepState{}
	for _, c := range l.Steps[i].Checks {
		if c.ProxyRestarted != nil {
			pod := c.ProxyRestarted.Pod
			if st.pids == nil {
				st.pids = map[string]int{}
			}
			if pid, err := livePID(ctx, r.Backend, pod); err == nil {
				st.pids[pod] = pid
			} else {
				r.Logger.Warn("read the live proxy pid", "pod", pod, "err", err)
			}
		}
		if c.Kind == "root-rotated" {
			if serial, err := signingRoot(ctx, r.Backend); err == nil {
				st.signingRoot = serial
			} else {
				r.Logger.Warn("read the CA's signing root", "err", err)
			}
		}
	}
	return st
}

// verify runs step i's verify actions (fresh traffic for its checks) in st. A wait
// that gives up is no error here: the checks then say what they saw.
func (r *Runner) verify(ctx context.Context, l *Lab, i int, st *stepState) error {
	for j, a := range l.Steps[i].Verify {
		err := r.runAction(ctx, l, a, st)
		if a.Wait != nil && errors.Is(err, errGaveUp) {
			r.printf("  verify: %v\n", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("verify: action %d (%s): %w", j+1, a.Kind, err)
		}
	}
	return nil
}

// Check runs step i's checks against the state its actions left and prints each result.
func (r *Runner) Check(ctx context.Context, l *Lab, i int, state *stepState) []Result {
	if state == nil {
		state = &stepState{}
	}
	var out []Result
	for _, c := range l.Steps[i].Checks {
		res := r.evaluate(ctx, l, c, state)
		out = append(out, res)
		if res.Passed {
			r.printf("  PASS %s: saw %s (want %s)\n", res.Check, res.Saw, res.Want)
		} else {
			r.printf("  FAIL %s: saw %s; want %s\n       hint: %s\n", res.Check, res.Saw, res.Want, res.Hint)
		}
	}
	return out
}

func (r *Runner) printf(format string, args ...any) {
	if r.Out != nil {
		fmt.Fprintf(r.Out, format, args...)
	}
}

// Describe renders a step for a person: its name, its instructions and the commands of
// its task.
func Describe(l *Lab, i int) string {
	return fmt.Sprintf("Step %d of %d: %s\n\n%s\n", i+1, len(l.Steps), l.Steps[i].Name, instructions(l, i))
}
