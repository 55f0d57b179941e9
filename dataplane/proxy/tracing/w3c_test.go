package tracing

import (
	"net/http"
	"strings"
	"testing"
	"time"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
)

func TestParseTraceparentAsEnvoysExtractor(t *testing.T) {
	for _, tc := range []struct {
		in             string
		trace, parent  string
		sampled, valid bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true, true},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", false, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true, true},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "", "", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", "", "", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bx-01", "", "", false, false},
		{"004bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", "", "", false, false},
		{"", "", "", false, false},
	} {
		trace, parent, sampled, ok := parseTraceparent(tc.in)
		if ok != tc.valid || trace != tc.trace || parent != tc.parent || sampled != tc.sampled {
			t.Errorf("parseTraceparent(%q) = %q %q %v %v, want %q %q %v %v", tc.in, trace, parent, sampled, ok, tc.trace, tc.parent, tc.sampled, tc.valid)
		}
	}
}

func TestEnvResourceAsEnvoysEnvironmentDetector(t *testing.T) {
	got := resourceString(mergeResource([]*commonv1.KeyValue{otelString("service.name", "productpage.default")}, envResource("service.namespace=bookinfo,deployment.environment=lab,bad,k=v")))
	if want := "service.name=productpage.default,service.namespace=bookinfo,deployment.environment=lab,"; got != want {
		t.Errorf("resource %q, want %q (a malformed pair ends the reading)", got, want)
	}
	got = resourceString(mergeResource([]*commonv1.KeyValue{otelString("service.name", "a")}, envResource("service.name=b")))
	if got != "service.name=b," {
		t.Errorf("resource %q: the detector's service.name replaces the configured one", got)
	}
}

func TestHostPathAsEnvoysExtractHostPath(t *testing.T) {
	for in, want := range map[string][2]string{
		"opentelemetry-collector.observability.svc.cluster.local/v1/traces": {"opentelemetry-collector.observability.svc.cluster.local", "/v1/traces"},
		"http://collector:4318/v1/traces":                                   {"collector:4318", "/v1/traces"},
		"collector":                                                         {"collector", "/"},
	} {
		if h, p := hostPath(in); h != want[0] || p != want[1] {
			t.Errorf("hostPath(%q) = %q %q, want %q", in, h, p, want)
		}
	}
}

// FuzzTraceparent: any traceparent either starts a child span whose injected
// traceparent is a valid one of the same trace, or makes no span.
func FuzzTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=b")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")
	f.Add("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		h := http.Header{HeaderTraceparent: {tp}, HeaderTracestate: {ts}}
		s := startW3C(h, KindServer, "ingress", true, time.Now())
		if s == nil {
			return
		}
		out := http.Header{}
		s.Inject(out)
		trace, parent, sampled, ok := parseTraceparent(out.Get(HeaderTraceparent))
		if !ok || trace != strings.ToLower(tp[3:35]) || parent != s.ID || sampled != s.Sampled {
			t.Fatalf("%q: injected %q, not a valid traceparent of the same trace and span", tp, out.Get(HeaderTraceparent))
		}
		if out.Get(HeaderTracestate) != ts {
			t.Fatalf("tracestate %q injected as %q", ts, out.Get(HeaderTracestate))
		}
	})
}
