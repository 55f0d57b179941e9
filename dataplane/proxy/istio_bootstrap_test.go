package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/proxy/admin"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestIstioSidecarBootstrapValidatesAndDumps loads meshlab's rendering of Istio's
// sidecar bootstrap (bootstrap/testdata/istio-sidecar.json) as Envoy's --mode validate
// does, and renders its /config_dump, whose bootstrap carries TypedStruct extensions.
func TestIstioSidecarBootstrapValidatesAndDumps(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("bootstrap", "testdata", "istio-sidecar.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "envoy-rev.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := ParseArgs([]string{"--mode", "validate", "-c", path})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(opts, testutil.Logger(t), nil)
	if err != nil {
		t.Fatalf("Istio's sidecar bootstrap is refused: %v", err)
	}
	dump, err := admin.MarshalJSON(s.ConfigDump(false))
	if err != nil {
		t.Fatalf("config_dump: %v", err)
	}
	for _, want := range []string{`"type_url": "type.googleapis.com/istio.workload.BootstrapExtension"`, `"api_type": "DELTA_GRPC"`, `"enable_deferred_creation_stats": true`} {
		if !strings.Contains(string(dump), want) {
			t.Errorf("config_dump lacks %s", want)
		}
	}
}
