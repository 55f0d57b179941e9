package ztunnelconfig

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// adminDump is the ztunnel admin's own golden /config_dump: the tables read what the admin
// writes.
const adminDump = "../ztunnel/admin/testdata/config_dump.golden"

func readDump(t *testing.T) *Dump {
	t.Helper()
	b, err := os.ReadFile(adminDump)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTables(t *testing.T) {
	t.Parallel()
	d := readDump(t)
	now := func() time.Time { return time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC) }
	cases := []struct {
		name string
		run  func(w Writer) error
	}{
		{"workloads", func(w Writer) error { return w.Workloads(d, WorkloadFilter{}, Short) }},
		{"workloads_namespace", func(w Writer) error { return w.Workloads(d, WorkloadFilter{Namespace: "LEGACY"}, Short) }},
		{"workloads_address_json", func(w Writer) error { return w.Workloads(d, WorkloadFilter{Address: "10.10.0.12"}, JSON) }},
		{"services", func(w Writer) error { return w.Services(d, NamespaceFilter{}, Short) }},
		{"services_yaml", func(w Writer) error { return w.Services(d, NamespaceFilter{Namespace: "default"}, YAML) }},
		{"policies", func(w Writer) error { return w.Policies(d, NamespaceFilter{}, Short) }},
		{"policies_json", func(w Writer) error { return w.Policies(d, NamespaceFilter{}, JSON) }},
		{"certificates", func(w Writer) error { return w.Certificates(d, Short) }},
		{"connections", func(w Writer) error { return w.Connections(d, ConnectionsFilter{}, Short) }},
		{"connections_raw_outbound", func(w Writer) error {
			return w.Connections(d, ConnectionsFilter{Raw: true, Direction: "outbound"}, Short)
		}},
		{"connections_workload_json", func(w Writer) error {
			return w.Connections(d, ConnectionsFilter{Workload: "productpage-v1-0.default"}, JSON)
		}},
		{"all", func(w Writer) error { return w.All(d, true, Short) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := tc.run(Writer{Out: &b, Now: now}); err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, tc.name, b.Bytes())
		})
	}
}

func TestAllJSONIsTheDump(t *testing.T) {
	t.Parallel()
	d := readDump(t)
	var b bytes.Buffer
	if err := (Writer{Out: &b}).All(d, false, JSON); err != nil {
		t.Fatal(err)
	}
	if b.String() != string(d.Raw)+"\n" {
		t.Error("all -o json is not the dump as read")
	}
	b.Reset()
	if err := (Writer{Out: &b}).All(d, false, YAML); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "workloadState:\n") {
		t.Errorf("all -o yaml lacks workloadState:\n%.300s", b.String())
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	// The older ztunnel's maps, and an empty dump.
	d, err := Parse([]byte(`{"workloads":{"b":{"uid":"b","name":"b"},"a":{"uid":"a","name":"a"}},"services":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Workloads) != 2 || d.Workloads[0].UID != "a" || d.Services != nil {
		t.Errorf("Parse = %+v", d)
	}
	if _, err := Parse([]byte(`{"workloads": 3}`)); err == nil {
		t.Error("a number for workloads parsed")
	}
	if _, err := Parse([]byte(`not json`)); err == nil {
		t.Error("not json parsed")
	}
	var c CIDRVIP
	if err := c.UnmarshalJSON([]byte(`"net/10.0.0.0/8"`)); err != nil || c.Network != "net" || c.CIDR != "10.0.0.0/8" {
		t.Errorf("CIDRVIP = %+v, %v", c, err)
	}
	if b, _ := c.MarshalJSON(); string(b) != `"net/10.0.0.0/8"` {
		t.Errorf("CIDRVIP marshal = %s", b)
	}
}

func TestParseFormat(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Format{"": Short, "short": Short, "json": JSON, "yaml": YAML} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("wide"); err == nil {
		t.Error("wide accepted")
	}
}

func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile(adminDump); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"workloads":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			return
		}
		w := Writer{Out: &bytes.Buffer{}}
		_ = w.All(d, true, Short)
	})
}
