package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/demoapp"
)

// TestKialiServices: the kiali persona's Services are the lab's, a Service's sidecar
// flag set when a pod it selects in its namespace has one, a waypoint's ServiceEntry
// host left out; the file is written below the pod's volume root, readable by its app.
func TestKialiServices(t *testing.T) {
	m := &model.Model{
		Services: []*model.Service{
			{Namespace: "bookinfo", Name: "details", Selector: map[string]string{"app": "details"}, Ports: []model.ServicePort{{Name: "foo", Port: 9080}}},
			{Namespace: "bookinfo", Name: "plain", Selector: map[string]string{"app": "plain"}, Ports: []model.ServicePort{{Name: "http", Port: 80, AppProtocol: "http"}}},
			{Namespace: "other", Name: "details", Selector: map[string]string{"app": "details"}},
			{Namespace: "bookinfo", Name: "se", Host: "httpbin.org"},
		},
		Pods: []*model.Pod{
			{Namespace: "bookinfo", Name: "details-1", Labels: map[string]string{"app": "details"}, Sidecar: model.SidecarSpec{Inject: true}},
			{Namespace: "bookinfo", Name: "plain-1", Labels: map[string]string{"app": "plain"}},
		},
	}
	got, _ := json.Marshal(kialiServices(m))
	want := `[{"namespace":"bookinfo","name":"details","ports":[{"name":"foo","port":9080}],"sidecar":true},` +
		`{"namespace":"bookinfo","name":"plain","ports":[{"name":"http","port":80,"appProtocol":"http"}],"sidecar":false},` +
		`{"namespace":"other","name":"details","ports":null,"sidecar":false}]`
	if string(got) != want {
		t.Errorf("kialiServices:\n got %s\nwant %s", got, want)
	}
	root := t.TempDir()
	if err := writeKialiFile(root, got); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, demoapp.KialiServicesFile))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the services file: %v %v", fi, err)
	}
}
