package runner

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
)

// Tasks renders step i's solution as what an attendee runs: one shell command line per
// action (the YAML an apply reads on its stdin beside it). The commands are the CLI's
// own verbs, so that running them does what `lab solve` does.
func Tasks(l *Lab, i int) []api.GuideTask {
	var out []api.GuideTask
	for _, a := range l.Steps[i].Solution {
		if t, ok := task(a); ok {
			out = append(out, t)
		}
	}
	return out
}

func task(a Action) (api.GuideTask, bool) {
	switch {
	case a.Apply != nil:
		return api.GuideTask{Command: "meshlab apply -f -", Stdin: applyYAML(a.Apply)}, true
	case a.Delete != nil:
		var cmds []string
		for _, o := range a.Delete.Objects {
			c := "meshlab delete " + o.Kind + " " + o.Name
			if o.Namespace != "" && o.Namespace != "default" {
				c += " -n " + o.Namespace
			}
			cmds = append(cmds, c)
		}
		return api.GuideTask{Command: strings.Join(cmds, " && ")}, true
	case a.Label != nil:
		c := "meshlab label namespace " + a.Label.Namespace
		for _, k := range slices.Sorted(maps.Keys(a.Label.Labels)) {
			c += " " + shellQuote(k+"="+a.Label.Labels[k])
		}
		return api.GuideTask{Command: c}, true
	case a.Traffic != nil:
		return api.GuideTask{Command: curlCommand(*a.Traffic)}, true
	case a.RestartProxy != nil:
		return api.GuideTask{Command: "meshlab proxy restart " + shellPod(cmpOr(a.RestartProxy.shown, a.RestartProxy.Pod))}, true
	case a.KillProxy != nil:
		return api.GuideTask{Command: "meshlab fault add kill-proxy " + shellPod(cmpOr(a.KillProxy.shown, a.KillProxy.Pod))}, true
	case a.ControlPlaneStop != nil:
		return api.GuideTask{Command: "meshlab fault add discovery-stop --duration " + shortDuration(a.ControlPlaneStop.Duration.D())}, true
	case a.RotateCerts != nil || a.Kind == "rotate-certs":
		return api.GuideTask{Command: "meshlab ca rotate-root"}, true
	case a.ClearFaults != nil || a.Kind == "clear-faults":
		return api.GuideTask{Command: "meshlab fault clear"}, true
	case a.Wait != nil && a.Wait.Until == nil:
		return api.GuideTask{Command: "sleep " + strconv.FormatFloat(a.Wait.Duration.D().Seconds(), 'f', -1, 64)}, true
	}
	// A wait until a check passes is what `lab check` does anyway; a load is refused
	// in a solution by validate.
	return api.GuideTask{}, false
}

// shortDuration writes d as a person would: 10m, not 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// applyYAML is the YAML of an apply: a file as written, inline objects as YAML documents.
func applyYAML(a *ApplyAction) string {
	if len(a.Objects) == 0 {
		return strings.TrimRight(string(a.data), "\n") + "\n"
	}
	docs := make([]string, 0, len(a.Objects))
	for _, o := range a.Objects {
		y, err := yaml.JSONToYAML(o)
		if err != nil { // validated at parse time; show the JSON, which is YAML too
			y = bytes.TrimSpace(o)
		}
		docs = append(docs, strings.TrimRight(string(y), "\n"))
	}
	return strings.Join(docs, "\n---\n") + "\n"
}

// curlCommand sends t's requests with curl from inside the pod, printing each status.
func curlCommand(t TrafficAction) string {
	n := cmp0(t.N, 20)
	args := []string{"curl", "-s", "-o", "/dev/null", "-w", shellQuote(`%{http_code}\n`)}
	if t.Method != "" && t.Method != "GET" {
		args = append(args, "-X", t.Method)
	}
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		args = append(args, "-H", shellQuote(k+": "+t.Headers[k]))
	}
	args = append(args, shellQuote(t.URL))
	c := "meshlab exec " + shellPod(cmpOr(t.shown, t.From)) + " -- " + strings.Join(args, " ")
	if n == 1 {
		return c
	}
	return fmt.Sprintf("for i in $(seq %d); do %s; done", n, c)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !safe(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TaskText renders tasks as shell a person can paste: an apply's YAML as a here-document.
func TaskText(tasks []api.GuideTask) string {
	var b strings.Builder
	for _, t := range tasks {
		b.WriteString(t.Command)
		if t.Stdin != "" {
			b.WriteString(" <<'EOF'\n" + t.Stdin + "EOF")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// instructions is what a person reads for step i: its prose, then its task as a shell
// block (Markdown, as the dashboard renders it).
func instructions(l *Lab, i int) string {
	text := strings.TrimSpace(l.Steps[i].Instructions)
	if tasks := Tasks(l, i); len(tasks) > 0 {
		text += "\n\nRun:\n\n```sh\n" + TaskText(tasks) + "```"
	}
	return text + "\n\nThen check the step: `meshlab lab check`."
}

// guidedLoadMax bounds a background load a guided step keeps running while the attendee
// works, so that a forgotten lab does not send requests forever.
const guidedLoadMax = 15 * time.Minute
