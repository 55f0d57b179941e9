package repro

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/scenarios/runner"
)

// AnnotationKey is the Lab document's annotation holding the recorded Facts.
const AnnotationKey = "meshlab.dev/repro"

// Write writes a repro file: the Lab document with facts, then every object.
func Write(w io.Writer, facts Facts, objects []api.ConfigObject) error {
	factsJSON, err := json.MarshalIndent(facts, "", "  ")
	if err != nil {
		return fmt.Errorf("encode facts: %w", err)
	}
	var checks []map[string]any
	for _, p := range facts.Pods {
		if p.Sidecar {
			checks = append(checks, map[string]any{"proxy-synced": map[string]string{"pod": p.Pod}})
		}
	}
	step := map[string]any{
		"name":         "rebuilt",
		"instructions": "The lab is rebuilt from the exported objects; every sidecar should be SYNCED.",
	}
	if len(checks) > 0 {
		step["checks"] = checks
	}
	doc := map[string]any{
		"apiVersion": runner.APIVersion,
		"kind":       runner.Kind,
		"metadata": map[string]any{
			"name":        cmpOr(facts.Lab, "repro"),
			"annotations": map[string]string{AnnotationKey: string(factsJSON)},
		},
		"spec": map[string]any{
			"title":        "Repro of lab " + facts.Lab + " exported " + facts.Exported.Format("2006-01-02 15:04:05Z"),
			"introduction": "Written by `meshlab repro export`; rebuild it with `meshlab repro run FILE`.",
			"steps":        []any{step},
		},
	}
	labYAML, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode lab document: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("# meshlab repro file (see `meshlab repro run`); the facts are in the annotation " + AnnotationKey + ".\n")
	b.Write(labYAML)
	for _, o := range objects {
		y, err := yaml.JSONToYAML(o.Object)
		if err != nil {
			return fmt.Errorf("encode %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write repro file: %w", err)
	}
	return nil
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// ErrNoFacts is returned by Read for a file without a Lab document carrying facts.
var ErrNoFacts = errors.New("no kind: Lab document with a " + AnnotationKey + " annotation")

// Read returns the facts a repro file recorded.
func Read(data []byte) (Facts, error) {
	for _, d := range docSep.Split(string(data), -1) {
		var doc struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(d), &doc); err != nil {
			return Facts{}, fmt.Errorf("read repro file: %w", err)
		}
		if doc.APIVersion != runner.APIVersion || doc.Kind != runner.Kind {
			continue
		}
		raw, ok := doc.Metadata.Annotations[AnnotationKey]
		if !ok {
			continue
		}
		var f Facts
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			return Facts{}, fmt.Errorf("read repro facts: %w", err)
		}
		return f, nil
	}
	return Facts{}, ErrNoFacts
}
