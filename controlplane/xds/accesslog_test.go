package xds

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
	telemetry "istio.io/api/telemetry/v1alpha1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// fileAccessLogs returns, per HCM or tcp_proxy filter of the pod's listeners (by
// listener/chain/filter), its file access logs.
func fileAccessLogs(t *testing.T, m *model.Model, pod string) map[string][]*filev3.FileAccessLog {
	t.Helper()
	out := map[string][]*filev3.FileAccessLog{}
	for _, r := range generate(t, m, pod)[resource.ListenerType] {
		l := r.(*listener.Listener)
		for _, fc := range l.GetFilterChains() {
			if strings.HasSuffix(fc.GetName(), "-blackhole") {
				continue // checked by TestListenerAccessLog
			}
			for i, f := range fc.GetFilters() {
				key := l.GetName() + "/" + fc.GetName() + "/" + f.GetName()
				var logs []*accesslogv3.AccessLog
				switch f.GetName() {
				case wellknown.HTTPConnectionManager:
					h := &hcm.HttpConnectionManager{}
					if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
						t.Fatalf("%s[%d]: %v", key, i, err)
					}
					logs = h.GetAccessLog()
				case wellknown.TCPProxy:
					p := &tcpproxy.TcpProxy{}
					if err := f.GetTypedConfig().UnmarshalTo(p); err != nil {
						t.Fatalf("%s[%d]: %v", key, i, err)
					}
					logs = p.GetAccessLog()
				default:
					continue
				}
				var files []*filev3.FileAccessLog
				for _, al := range logs {
					if al.GetName() != wellknown.FileAccessLog {
						t.Errorf("%s: access logger %q, want %s", key, al.GetName(), wellknown.FileAccessLog)
					}
					fl := &filev3.FileAccessLog{}
					if err := al.GetTypedConfig().UnmarshalTo(fl); err != nil {
						t.Fatalf("%s: %v", key, err)
					}
					files = append(files, fl)
				}
				out[key] = files
			}
		}
	}
	return out
}

func TestAccessLogOnEveryHCMAndTCPProxy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mesh  model.MeshConfig
		check func(t *testing.T, fl *filev3.FileAccessLog)
	}{
		{name: "default: Istio's TEXT format to stdout", check: func(t *testing.T, fl *filev3.FileAccessLog) {
			t.Helper()
			if fl.GetPath() != "/dev/stdout" || fl.GetLogFormat().GetTextFormatSource().GetInlineString() != IstioTextLogFormat {
				t.Errorf("access log = %v, want Istio's text format to /dev/stdout", fl)
			}
		}},
		{name: "JSON: Istio's fields", mesh: model.MeshConfig{AccessLogFile: "/tmp/x.log", AccessLogEncoding: model.AccessLogJSON}, check: func(t *testing.T, fl *filev3.FileAccessLog) {
			t.Helper()
			fields := fl.GetLogFormat().GetJsonFormat().GetFields()
			if fl.GetPath() != "/tmp/x.log" || len(fields) != len(IstioJSONLogFormat) || fields["request_id"].GetStringValue() != "%REQ(X-REQUEST-ID)%" {
				t.Errorf("access log = %v, want Istio's JSON format to /tmp/x.log", fl)
			}
		}},
		{name: "user TEXT format gets a newline", mesh: model.MeshConfig{AccessLogFormat: "%RESPONSE_CODE%"}, check: func(t *testing.T, fl *filev3.FileAccessLog) {
			t.Helper()
			if got := fl.GetLogFormat().GetTextFormatSource().GetInlineString(); got != "%RESPONSE_CODE%\n" {
				t.Errorf("format = %q, want %q", got, "%RESPONSE_CODE%\n")
			}
		}},
		{name: "user JSON format", mesh: model.MeshConfig{AccessLogEncoding: model.AccessLogJSON, AccessLogFormat: `{"code":"%RESPONSE_CODE%","up":{"host":"%UPSTREAM_HOST%"}}`}, check: func(t *testing.T, fl *filev3.FileAccessLog) {
			t.Helper()
			b, _ := json.Marshal(fl.GetLogFormat().GetJsonFormat().AsMap())
			if string(b) != `{"code":"%RESPONSE_CODE%","up":{"host":"%UPSTREAM_HOST%"}}` {
				t.Errorf("json format = %s", b)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := helloModel()
			m.Mesh = tt.mesh
			for _, pod := range []string{"frontend-v1", "backend-v1"} {
				got := fileAccessLogs(t, m, pod)
				// frontend: 2 tcp_proxy in virtualOutbound, 1 outbound HCM; both: virtualInbound's
				// passthrough tcp_proxies and HCMs.
				if len(got) < 5 {
					t.Errorf("%s: %d HCM/tcp_proxy filters, want at least 5", pod, len(got))
				}
				for key, fls := range got {
					if len(fls) != 1 {
						t.Errorf("%s %s: %d access logs, want 1", pod, key, len(fls))
						continue
					}
					tt.check(t, fls[0])
				}
			}
		})
	}
}

func TestAccessLogOff(t *testing.T) {
	t.Parallel()
	m := helloModel()
	m.Mesh.AccessLogOff = true
	m.Mesh.AccessLogFile = "/dev/stdout"
	for key, fls := range fileAccessLogs(t, m, "frontend-v1") {
		if len(fls) != 0 {
			t.Errorf("%s: %d access logs with accessLogFile \"\", want none", key, len(fls))
		}
	}
}

func TestAccessLogBadJSONFormat(t *testing.T) {
	t.Parallel()
	m := helloModel()
	m.Mesh = model.MeshConfig{AccessLogEncoding: model.AccessLogJSON, AccessLogFormat: "not json"}
	if _, err := Generate(m, m.Pod("frontend-v1")); err == nil {
		t.Error("Generate with a JSON format that is not JSON: no error")
	}
}

// As Istio's: the listeners that bind a port log the connections no chain matched
// (response flag NR), and the blackhole chains (a loop to the capture ports) log nothing.
func TestListenerAccessLog(t *testing.T) {
	t.Parallel()
	for _, r := range generate(t, helloModel(), "frontend-v1")[resource.ListenerType] {
		l := r.(*listener.Listener)
		bound := l.GetName() == VirtualOutboundListener || l.GetName() == VirtualInboundListener
		if got := len(l.GetAccessLog()); bound != (got == 1) {
			t.Errorf("%s: %d listener access logs", l.GetName(), got)
		}
		if bound && !slices.Equal(l.GetAccessLog()[0].GetFilter().GetResponseFlagFilter().GetFlags(), []string{"NR"}) {
			t.Errorf("%s: listener access log filter %v, want response flag NR", l.GetName(), l.GetAccessLog()[0].GetFilter())
		}
		for _, fc := range l.GetFilterChains() {
			if !strings.HasSuffix(fc.GetName(), "-blackhole") {
				continue
			}
			p := &tcpproxy.TcpProxy{}
			if err := terminalFilter(fc).GetTypedConfig().UnmarshalTo(p); err != nil {
				t.Fatal(err)
			}
			if len(p.GetAccessLog()) != 0 {
				t.Errorf("%s/%s logs; want no access log on a blackhole chain", l.GetName(), fc.GetName())
			}
		}
	}
}

// A Telemetry's access logging overrides MeshConfig's for the proxies it selects: the
// Access Logs task's mesh-wide envoy provider turns logs on with accessLogFile "", and a
// more specific one (the pod's namespace, then a selector) disables them.
func TestTelemetryAccessLog(t *testing.T) {
	t.Parallel()
	tel := func(ns, name string, sel map[string]string, disabled bool) *model.IstioConfig[*telemetry.Telemetry] {
		spec := &telemetry.Telemetry{AccessLogging: []*telemetry.AccessLogging{{Providers: []*telemetry.ProviderRef{{Name: "envoy"}}}}}
		if disabled {
			spec.AccessLogging[0].Disabled = wrapperspb.Bool(true)
		}
		if sel != nil {
			spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: sel}
		}
		return &model.IstioConfig[*telemetry.Telemetry]{Name: name, Namespace: ns, Spec: spec}
	}
	count := func(m *model.Model) (n int) {
		for key, fls := range fileAccessLogs(t, m, "frontend-v1") {
			for _, fl := range fls {
				if fl.GetPath() != "/dev/stdout" {
					t.Errorf("%s: path %q, want the envoy provider's /dev/stdout", key, fl.GetPath())
				}
				n++
			}
		}
		return n
	}
	m := helloModel()
	m.Mesh.AccessLogOff = true
	if count(m) != 0 {
		t.Fatal("logs with accessLogFile \"\" and no Telemetry")
	}
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{tel("istio-system", "mesh-default", nil, false)}
	if count(m) == 0 {
		t.Fatal("no access log with the mesh-wide Telemetry's envoy provider")
	}
	m.Istio.Telemetries = append(m.Istio.Telemetries, tel(m.Pod("frontend-v1").Namespace, "ns-off", nil, true))
	if n := count(m); n != 0 {
		t.Fatalf("%d access logs with the namespace's Telemetry disabled, want none", n)
	}
	m.Istio.Telemetries = append(m.Istio.Telemetries, tel(m.Pod("frontend-v1").Namespace, "pod-on", m.Pod("frontend-v1").Labels, false))
	if count(m) == 0 {
		t.Fatal("no access log with a selector's Telemetry on over the namespace's disabled one")
	}
}
