package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

func TestReadConfigFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, data := range map[string]string{"b.yaml": "b", "a.yml": "a", "c.json": "c", "notes.txt": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := readConfigFiles([]string{dir, "-"}, strings.NewReader("from stdin"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f.Name)+"="+f.Data)
	}
	if strings.Join(got, " ") != "a.yml=a b.yaml=b c.json=c <stdin>=from stdin" {
		t.Errorf("files = %v", got)
	}
	if _, err := readConfigFiles([]string{filepath.Join(dir, "missing.yaml")}, nil); err == nil {
		t.Error("a missing file was read")
	}
	if _, err := readConfigFiles([]string{filepath.Join(dir, "sub.yaml")}, nil); err == nil || !strings.Contains(err.Error(), "no .yaml, .yml or .json files") {
		t.Errorf("empty directory: err = %v", err)
	}
}

func TestPrintProxyStatus(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	err := printProxyStatus(&b, []api.ProxyStatus{
		{Pod: "backend-v1", Namespace: "default", Connected: true, Types: map[string]api.TypeStatus{
			"CDS": {Sent: "v2", Acked: "v2"}, "LDS": {Sent: "v2", Acked: "v2"}, "EDS": {Sent: "v2", Acked: "v2"}, "RDS": {Sent: "v2", Acked: "v2"},
		}},
		{Pod: "frontend-v1", Namespace: "default", Connected: true, Types: map[string]api.TypeStatus{
			"CDS": {Sent: "v3", Acked: "v2", NackError: "unknown field", LastNack: time.Unix(1, 0)}, "LDS": {Sent: "v3", Acked: "v2"}, "EDS": {Sent: "v2", Acked: "v2"},
		}},
		{NodeID: "ztunnel~10.244.255.254~ztunnel-x.istio-system~istio-system.svc.cluster.local", Connected: true, Types: map[string]api.TypeStatus{
			"WDS": {Sent: "v3", Acked: "v3"}, "WADS": {Sent: "v3", Acked: "v2", NackError: "bad policy", LastNack: time.Unix(1, 0)},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `NAME                     CDS       LDS       EDS       RDS        VERSION   CONNECTED
backend-v1.default       SYNCED    SYNCED    SYNCED    SYNCED     v2        true
frontend-v1.default      NACK      STALE     SYNCED    NOT SENT   v2        true
ztunnel-x.istio-system   IGNORED   IGNORED   IGNORED   IGNORED    v3,v2     true
NACK frontend-v1.default CDS: unknown field
NACK ztunnel-x.istio-system WADS: bad policy
`
	if b.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", b.String(), want)
	}
}
