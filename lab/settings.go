package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/lab/istiodcp"
)

// A scenario may carry settings for the lab itself, as one document that scenario loading
// skips (config.IsLabDocument):
//
//	apiVersion: meshlab.dev/v1alpha1
//	kind: LabSettings
//	metadata: {name: lab}
//	spec:
//	  controlPlane: istiod   # or meshlab, the default: what generates the proxies' config
//
// `up --control-plane` given on the command line wins over it. A lab file (`meshlab lab
// run`) carries it as one of its documents, which reach the lab with the scenario's.

// labSettings is a scenario's LabSettings spec.
type labSettings struct {
	ControlPlane string `json:"controlPlane,omitempty"`
}

var settingsDocSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// scenarioSettings reads the scenario's LabSettings document (none: the zero settings).
// A second one, an unknown field or an unknown control plane is an error naming the file.
func scenarioSettings(file string, data []byte) (labSettings, error) {
	var out labSettings
	found := false
	for i, doc := range settingsDocSep.Split(string(data), -1) {
		if !strings.Contains(doc, config.LabSettingsKind) {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			continue // not YAML: scenario loading says so
		}
		var hdr struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if json.Unmarshal(js, &hdr) != nil || hdr.Kind != config.LabSettingsKind || !config.IsLabDocument(hdr.APIVersion, hdr.Kind) {
			continue
		}
		where := fmt.Sprintf("%s: document %d (%s)", file, i+1, config.LabSettingsKind)
		if found {
			return out, fmt.Errorf("%s: a scenario holds at most one %s", where, config.LabSettingsKind)
		}
		found = true
		var d struct {
			APIVersion string          `json:"apiVersion"`
			Kind       string          `json:"kind"`
			Metadata   json.RawMessage `json:"metadata"`
			Spec       labSettings     `json:"spec"`
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return out, fmt.Errorf("%s: %w", where, err)
		}
		switch d.Spec.ControlPlane {
		case "", istiodcp.ControlPlaneMeshlab, istiodcp.ControlPlaneIstiod:
		default:
			return out, fmt.Errorf("%s: spec.controlPlane: %q: want %s or %s", where, d.Spec.ControlPlane, istiodcp.ControlPlaneMeshlab, istiodcp.ControlPlaneIstiod)
		}
		out = d.Spec
	}
	return out, nil
}
