package api

import (
	"context"
	"errors"
)

// GuideState is where a person is in a lab started with `meshlab lab start`.
type GuideState struct {
	Lab          string `json:"lab"`
	Title        string `json:"title"`
	Introduction string `json:"introduction,omitempty"`
	Step         int    `json:"step"` // 1-based
	Steps        int    `json:"steps"`
	StepName     string `json:"stepName"`
	Instructions string `json:"instructions"`
	// Tasks are the commands the step asks the attendee to run (its solution).
	Tasks []GuideTask `json:"tasks,omitempty"`
	// Error is why the step's actions failed, if they did.
	Error string `json:"error,omitempty"`
	// Passed counts the steps whose check passed; Done is set once the last one did.
	Passed int  `json:"passed"`
	Done   bool `json:"done,omitempty"`
}

// GuideTask is one shell command line of a step's task; Stdin, when set, is what the
// command reads (the YAML of a `meshlab apply -f -`).
type GuideTask struct {
	Command string `json:"command"`
	Stdin   string `json:"stdin,omitempty"`
}

// GuideCheck is the outcome of checking the current step.
type GuideCheck struct {
	Step    int           `json:"step"`
	Passed  bool          `json:"passed"`
	Error   string        `json:"error,omitempty"` // the solution's or verify's actions failed
	Results []CheckResult `json:"results"`
	// Done is set when this check passed the lab's last step.
	Done bool `json:"done,omitempty"`
}

// CheckResult is one check: what it saw, what it wanted, and a hint when it failed.
type CheckResult struct {
	Check  string `json:"check"`
	Passed bool   `json:"passed"`
	Saw    string `json:"saw"`
	Want   string `json:"want"`
	Hint   string `json:"hint,omitempty"`
}

// ErrNoGuide answers guide requests to a lab not started with `meshlab lab start`,
// ErrLastStep a request to move past the last step, ErrNoSolution a request to solve a
// step that has none.
var (
	ErrNoGuide    = errors.New("this lab has no guide: start one with meshlab lab start")
	ErrLastStep   = errors.New("this is the last step")
	ErrNoSolution = errors.New("this step has no solution to apply")
)

// Guide reads where the lab's guide is.
func (c *Client) Guide(ctx context.Context) (GuideState, error) {
	var s GuideState
	return s, c.get(ctx, "/v1/guide", &s)
}

// GuideCheck checks the current step.
func (c *Client) GuideCheck(ctx context.Context) (GuideCheck, error) {
	var r GuideCheck
	return r, c.postJSON(ctx, "/v1/guide/check", struct{}{}, &r)
}

// GuideNext moves to the next step and runs its actions.
func (c *Client) GuideNext(ctx context.Context) (GuideState, error) {
	var s GuideState
	return s, c.postJSON(ctx, "/v1/guide/next", struct{}{}, &s)
}

// GuideSolve applies the current step's solution and checks it.
func (c *Client) GuideSolve(ctx context.Context) (GuideCheck, error) {
	var r GuideCheck
	return r, c.postJSON(ctx, "/v1/guide/solve", struct{}{}, &r)
}
