package api

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
	ErrNoGuide    = sentinel("this lab has no guide: start one with meshlab lab start", ErrNotFound)
	ErrLastStep   = sentinel("this is the last step", ErrConflict)
	ErrNoSolution = sentinel("this step has no solution to apply", ErrConflict)
)
