package lab

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"
)

// A scenario's LabSettings document chooses the control plane; scenario loading skips it;
// a second one, an unknown field or an unknown control plane is refused with the file.
func TestScenarioSettings(t *testing.T) {
	const svc = `apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 8080}]
`
	settings := func(spec string) string {
		return "apiVersion: meshlab.dev/v1alpha1\nkind: LabSettings\nmetadata: {name: lab}\nspec:\n" + spec
	}
	data := svc + "---\n" + settings("  controlPlane: istiod\n")
	got, err := scenarioSettings("s.yaml", []byte(data))
	if err != nil || got.ControlPlane != "istiod" {
		t.Fatalf("settings %+v, %v; want controlPlane istiod", got, err)
	}
	if _, err := config.Load("s.yaml", []byte(settings("  controlPlane: istiod\n"))); err != nil && !strings.Contains(err.Error(), "no objects") {
		t.Errorf("scenario loading refused the LabSettings document: %v", err)
	}
	if got, err := scenarioSettings("s.yaml", []byte(svc)); err != nil || got != (labSettings{}) {
		t.Errorf("no settings: %+v, %v", got, err)
	}
	for _, c := range []struct{ data, want string }{
		{settings("  controlPlane: pilot\n"), `s.yaml: document 1 (LabSettings): spec.controlPlane: "pilot": want meshlab or istiod`},
		{settings("  controlPlan: istiod\n"), `s.yaml: document 1 (LabSettings): json: unknown field "controlPlan"`},
		{settings("  controlPlane: istiod\n") + "---\n" + settings("  controlPlane: meshlab\n"), "s.yaml: document 2 (LabSettings): a scenario holds at most one LabSettings"},
	} {
		_, err := scenarioSettings("s.yaml", []byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("settings %q: error %v, want %q", c.data, err, c.want)
		}
	}
}
