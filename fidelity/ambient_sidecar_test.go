package fidelity

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// TestAmbientSidecarToAmbient holds what a sidecar gets for an ambient destination to
// istiod's output with ambient on (PILOT_ENABLE_SENDING_HBONE at its ambient default):
// the ambient pod's endpoint is the connect_originate internal listener with the tunnel
// metadata, the destination's cluster puts the "hbone" transport socket match first, and
// the sidecar has the connect_originate listener and cluster that open HBONE to the pod's
// 15008. Only these resources are compared: the rest of the sidecar's output is the
// sidecar run's (ambient off).
func TestAmbientSidecarToAmbient(t *testing.T) {
	if !ambientMode() {
		t.Skip("istiod's ambient flags are fixed at process start: run with PILOT_ENABLE_AMBIENT=true (make fidelity does)")
	}
	sc, err := loadScenario("testdata/interop/sidecar-ambient.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Build(buildOptions)
	if err != nil {
		t.Fatal(err)
	}
	enroll(m)
	o, err := startAmbientOracle(t, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sleep := m.Pod("sleep")
	istiod, err := collectIstiod(ctx, o.addr, sleep)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := meshlabResources(m, sleep)
	if err != nil {
		t.Fatal(err)
	}
	const dst = "outbound|8000||httpbin.default.svc.cluster.local"
	compared := map[string][]string{
		clusterType:  {"connect_originate", dst},
		listenerType: {"connect_originate"},
		endpointType: {dst},
	}
	pick := func(all map[string]map[string]proto.Message) map[string]map[string]proto.Message {
		out := map[string]map[string]proto.Message{}
		for typ, names := range compared {
			out[typ] = map[string]proto.Message{}
			for _, n := range names {
				if r, ok := all[typ][n]; ok {
					out[typ][n] = r
				}
			}
		}
		return out
	}
	want, got := pick(istiod), pick(ours)
	for typ, names := range compared {
		for _, n := range names {
			if want[typ][n] == nil {
				t.Errorf("istiod sent no %s %s: the oracle's mode is not what this test holds", shortNames[typ], n)
			}
			if got[typ][n] == nil {
				t.Errorf("meshlab generates no %s %s", shortNames[typ], n)
			}
		}
	}
	for _, d := range diffTypes([]string{clusterType, listenerType, endpointType}, want, got) {
		if known := sidecarWideGap(d); known != "" {
			t.Logf("differs from istiod as every sidecar's output does (%s): %s", known, d)
			continue
		}
		t.Errorf("differs from istiod: %s", d)
	}
}

// sidecarWideGap names the known list's reason for a difference every sidecar's output
// has, ambient or not (testdata/known, issue 15.2), or "" for any other.
func sidecarWideGap(d difference) string {
	switch s := d.String(); {
	case strings.HasPrefix(s, "CDS outbound|") && strings.HasSuffix(s, " alt_stat_name missing"):
		return "issue 15.2: istiod names cluster stats with alt_stat_name"
	case strings.HasPrefix(s, "EDS ") && strings.HasSuffix(s, "filter_metadata[istio].fields[workload].string_value changed"):
		return "issue 15.2: endpoint istio metadata \"workload\" differs"
	}
	return ""
}
