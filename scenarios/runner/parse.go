package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// actionKinds and checkKinds are the recognised keys; pending ones are refused with a
// clear message until the lab API they need exists.
var (
	actionKinds  = []string{"apply", "delete", "traffic", "restart-proxy", "kill-proxy", "wait", "load", "control-plane-stop", "rotate-certs", "clear-faults", "label"}
	checkKinds   = []string{"distribution", "status", "latency", "proxy-synced", "nack", "stat", "epoch", "no-failures", "denied", "mtls", "header", "proxy-stale", "root-rotated", "proxy-restarted", "hbone"}
	pendingKinds = map[string]string{}
	// emptyKinds may be written with no fields (`rotate-certs: {}` or `rotate-certs:`).
	emptyKinds = []string{"no-failures", "rotate-certs", "clear-faults", "root-rotated"}
)

// Sources says where Parse finds what a lab file refers to.
type Sources struct {
	// Scenario returns a bundled scenario by name and its file name (required when a
	// lab names spec.scenario).
	Scenario func(name string) ([]byte, string, error)
	// Dir is where files named by apply actions are read (default: the lab file's dir).
	Dir string
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

type rawDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Title        string    `json:"title"`
		Introduction string    `json:"introduction,omitempty"`
		Scenario     string    `json:"scenario,omitempty"`
		Steps        []rawStep `json:"steps"`
	} `json:"spec"`
}

type rawStep struct {
	Name         string                       `json:"name"`
	Instructions string                       `json:"instructions,omitempty"`
	Actions      []map[string]json.RawMessage `json:"actions,omitempty"`
	Checks       []map[string]json.RawMessage `json:"checks,omitempty"`
	Solution     []map[string]json.RawMessage `json:"solution,omitempty"`
	Verify       []map[string]json.RawMessage `json:"verify,omitempty"`
}

// Parse reads and validates the lab file: its one `kind: Lab` document, the scenario it
// brings up, and every step against that scenario. Every problem is reported, each with
// the file, step and field; the error is then an ErrorList.
func Parse(file string, data []byte, src Sources) (*Lab, error) {
	var errs ErrorList
	p := problems{file: filepath.Base(file), list: &errs}
	var labJSON []byte
	for _, d := range docSep.Split(string(data), -1) {
		js, err := yaml.YAMLToJSONStrict([]byte(d))
		if err != nil {
			p.addf("", "parse YAML: %v", err)
			continue
		}
		var hdr struct{ APIVersion, Kind string }
		if json.Unmarshal(js, &hdr) != nil || hdr.Kind != Kind || hdr.APIVersion != APIVersion {
			continue
		}
		if labJSON != nil {
			p.addf("kind", "a lab file holds one kind: Lab document, found a second")
			continue
		}
		labJSON = js
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if labJSON == nil {
		p.addf("kind", "no document with apiVersion: %s and kind: %s", APIVersion, Kind)
		return nil, errs
	}
	var raw rawDoc
	dec := json.NewDecoder(bytes.NewReader(labJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		p.addf("", "decode Lab: %v", err)
		return nil, errs
	}
	l := &Lab{File: p.file, Name: raw.Metadata.Name, Title: raw.Spec.Title, Introduction: raw.Spec.Introduction}
	if l.Name == "" {
		p.addf("metadata.name", "required")
	}
	if len(raw.Spec.Steps) == 0 {
		p.addf("spec.steps", "a lab needs at least one step")
	}
	l.ScenarioFile, l.ScenarioData = p.file, data
	scenarioOK := true
	if raw.Spec.Scenario != "" {
		scenarioOK = false
		if src.Scenario == nil {
			p.addf("spec.scenario", "no bundled scenarios to look %q up in", raw.Spec.Scenario)
		} else if base, name, err := src.Scenario(raw.Spec.Scenario); err != nil {
			p.addf("spec.scenario", "%v", err)
		} else {
			l.ScenarioFile = name
			l.ScenarioData = slices.Concat(base, []byte("\n---\n"), data)
			scenarioOK = true
		}
	}
	dir := src.Dir
	if dir == "" {
		dir = filepath.Dir(file)
	}
	for i, rs := range raw.Spec.Steps {
		sp := problems{file: p.file, step: i + 1, name: rs.Name, list: &errs}
		path := fmt.Sprintf("spec.steps[%d]", i)
		if rs.Name == "" {
			sp.addf(path+".name", "required")
		}
		st := Step{Name: rs.Name, Instructions: rs.Instructions}
		st.Actions = decodeActions(rs.Actions, path+".actions", dir, sp)
		st.Solution = decodeActions(rs.Solution, path+".solution", dir, sp)
		st.Verify = decodeActions(rs.Verify, path+".verify", dir, sp)
		if strings.TrimSpace(rs.Instructions) == "" {
			sp.addf(path+".instructions", "required: what the attendee does in this step, and why")
		}
		for j, m := range rs.Checks {
			if c, ok := decodeCheck(m, fmt.Sprintf("%s.checks[%d]", path, j), sp); ok {
				st.Checks = append(st.Checks, c)
			}
		}
		l.Steps = append(l.Steps, st)
	}
	// Validate what decoded, so one run reports every problem.
	if scenarioOK {
		validate(l, &errs)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return l, nil
}

func decodeActions(in []map[string]json.RawMessage, path, dir string, p problems) []Action {
	var out []Action
	for j, m := range in {
		ap := fmt.Sprintf("%s[%d]", path, j)
		var a Action
		k, ok := decodeOne(m, ap, "action", actionKinds, &a, p)
		if !ok {
			continue
		}
		a.Kind = k
		if a.Apply != nil {
			loadApply(a.Apply, ap+".apply", dir, p)
		}
		out = append(out, a)
	}
	return out
}

func decodeCheck(m map[string]json.RawMessage, path string, p problems) (Check, bool) {
	var c Check
	k, ok := decodeOne(m, path, "check", checkKinds, &c, p)
	c.Kind = k
	return c, ok
}

// decodeOne strictly decodes a one-key mapping {kind: value} into out.
func decodeOne(m map[string]json.RawMessage, path, what string, known []string, out any, p problems) (string, bool) {
	if len(m) != 1 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		p.addf(path, "want exactly one %s (one of %s), got %d keys %v", what, strings.Join(known, ", "), len(m), keys)
		return "", false
	}
	var k string
	for k = range m {
	}
	if why, ok := pendingKinds[k]; ok {
		p.addf(path+"."+k, "%s %q is recognised but not available yet in this meshlab: %s", what, k, why)
		return k, false
	}
	if !slices.Contains(known, k) {
		p.addf(path+"."+k, "unknown %s %q (want one of %s)", what, k, strings.Join(known, ", "))
		return k, false
	}
	js, _ := json.Marshal(map[string]json.RawMessage{k: m[k]})
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var ute *json.UnmarshalTypeError
		field := path + "." + k
		if errors.As(err, &ute) && ute.Field != "" {
			field = path + "." + ute.Field
		} else if f := badField(k, m[k], out); f != "" {
			field += "." + f
		}
		p.addf(field, "%v", strings.TrimPrefix(err.Error(), "json: "))
		return k, false
	}
	if string(m[k]) == "null" && !slices.Contains(emptyKinds, k) {
		p.addf(path+"."+k, "needs its fields")
		return k, false
	}
	return k, true
}

// badField finds which field of value (an object) fails to decode on its own, for
// errors that do not say (a custom unmarshaler's); "" when it cannot tell.
func badField(k string, value json.RawMessage, out any) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(value, &fields) != nil {
		return ""
	}
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		js, _ := json.Marshal(map[string]map[string]json.RawMessage{k: {f: fields[f]}})
		fresh := reflect.New(reflect.TypeOf(out).Elem()).Interface()
		if json.Unmarshal(js, fresh) != nil {
			return f
		}
	}
	return ""
}

// loadApply turns inline objects or a file into the YAML the lab's apply takes.
func loadApply(a *ApplyAction, path, dir string, p problems) {
	switch {
	case len(a.Objects) > 0 && a.File != "":
		p.addf(path, "set objects or file, not both")
	case a.File != "":
		f := a.File
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			p.addf(path+".file", "%v", err)
			return
		}
		a.data = data
	case len(a.Objects) > 0:
		docs := make([][]byte, len(a.Objects))
		for i, o := range a.Objects {
			docs[i] = o // JSON is YAML
		}
		a.data = bytes.Join(docs, []byte("\n---\n"))
	default:
		p.addf(path, "needs objects or file")
	}
}
