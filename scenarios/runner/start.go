package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
)

// StartOptions is what `meshlab lab start` runs.
type StartOptions struct {
	Lab *Lab        // required
	Up  lab.Options // required: the lab to bring up (Name, RunRoot...); its scenario and Guide are Lab's
	Out io.Writer   // required: where the guide and its hints are printed
}

// StartGuided brings the lab up in this process with a guide on its API (`meshlab lab
// start`), begins the first step, prints the lab's introduction, the step and how to go
// on from another terminal (`lab check|next|show|solve`), and keeps the lab until ctx
// ends; then it stops the guide's background work and the lab.
func StartGuided(ctx context.Context, o StartOptions) error {
	guide := NewGuide(o.Lab, Runner{Logger: o.Up.Logger})
	o.Up.ScenarioFile, o.Up.ScenarioData = o.Lab.ScenarioFile, o.Lab.ScenarioData
	o.Up.Guide = guide
	running, err := lab.Start(ctx, o.Up)
	if err != nil {
		return err
	}
	out, name := o.Out, o.Up.Name
	// As RunLab: the first step's actions, and a scripted `lab solve` right after, must
	// find the apps listening (lab/applisten.go).
	wctx, cancel := context.WithTimeout(ctx, appListenTimeout)
	if err := lab.WaitAppsListening(wctx, running); err != nil {
		fmt.Fprintf(out, "warning: %v\n", err)
	}
	cancel()
	st := guide.Begin(ctx, NewLabBackend(running, o.Up.RunRoot, name))
	// Hints name the binary as it was run (./bin/meshlab from a checkout).
	self := "meshlab"
	if strings.Contains(os.Args[0], "/") {
		self = os.Args[0]
	}
	fmt.Fprintf(out, "\n%s\n\n%s\n", o.Lab.Title, strings.TrimSpace(o.Lab.Introduction))
	WriteStep(out, st)
	if u := running.DashboardURL(); u != "" {
		fmt.Fprintf(out, "\nDashboard: %s\n", u)
	}
	fmt.Fprintf(out, "\nFrom another terminal:\n  sudo %[1]s lab check --name %[2]s   # send the step's traffic and check it\n  sudo %[1]s lab next --name %[2]s    # go on\n  sudo %[1]s lab show --name %[2]s    # show the current step again\n  sudo %[1]s lab solve --name %[2]s   # apply the step's solution\nStop with Ctrl-C.\n", self, name)
	running.Wait(ctx)
	fmt.Fprintln(out, "stopping lab", name)
	guide.Close()
	if err := running.Close(); err != nil {
		return err
	}
	fmt.Fprintln(out, "lab", name, "stopped")
	return nil
}

// WriteStep prints a guide's step for a terminal: its instructions, with the task's
// shell block (Markdown for the dashboard) indented as a terminal shows code.
func WriteStep(w io.Writer, st api.GuideState) {
	fmt.Fprintf(w, "\nStep %d of %d: %s\n\n", st.Step, st.Steps, st.StepName)
	code := false
	for _, line := range strings.Split(strings.TrimSpace(st.Instructions), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			code = !code
		case code:
			fmt.Fprintf(w, "    %s\n", line)
		default:
			fmt.Fprintln(w, line)
		}
	}
	if st.Error != "" {
		fmt.Fprintf(w, "\nThe step's setup failed: %s\n", st.Error)
	}
}
