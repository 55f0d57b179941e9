package lab

// Summary is one lab under a run root as `meshlab status` lists it when there are
// several.
type Summary struct {
	Name     string `json:"name"`
	State    string `json:"state"` // running, or stopped (what was left needs meshlab clean)
	Pods     int    `json:"pods"`
	Scenario string `json:"scenario"`
}

// Summaries lists every lab under root (Known's order) with its state, pod count and
// scenario from its record; a lab whose record cannot be read is listed as stopped.
func Summaries(root string) ([]Summary, error) {
	names, err := Known(root)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(names))
	for _, n := range names {
		s := Summary{Name: n, State: "stopped (run meshlab clean)"}
		p := PathsFor(root, n)
		if r, err := ReadRecord(p); err == nil {
			s.Pods, s.Scenario = len(r.Pods), r.Scenario
			if processAlive(r.PID, r.PIDStart) {
				s.State = "running"
			}
		}
		out = append(out, s)
	}
	return out, nil
}
