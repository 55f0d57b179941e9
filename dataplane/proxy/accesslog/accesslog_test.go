package accesslog

import (
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/internal/testutil"
)

func fileLog(t *testing.T, f *filev3.FileAccessLog) *accesslogv3.AccessLog {
	t.Helper()
	a, err := anypb.New(f)
	if err != nil {
		t.Fatal(err)
	}
	return &accesslogv3.AccessLog{Name: FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: a}}
}

func sample() *Info {
	return &Info{
		Start: time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC), Duration: 12 * time.Millisecond,
		Protocol: "HTTP/1.1", Method: "GET", Path: "/api?q=1", Authority: "reviews:9080",
		ReqHeader:  http.Header{"X-Request-Id": {"rid"}, "User-Agent": {"curl/8"}, "X-Envoy-Original-Path": {"/orig"}},
		RespHeader: http.Header{"X-Envoy-Upstream-Service-Time": {"7"}},
		Code:       503, Flags: UpstreamOverflow | UpstreamRetryLimitExceeded, BytesReceived: 0, BytesSent: 81,
		UpstreamHost: "10.0.0.5:9080", UpstreamCluster: "outbound|9080|v1|reviews.default.svc.cluster.local",
		DownstreamLocal: netip.MustParseAddrPort("10.96.0.10:9080"), DownstreamPeer: netip.MustParseAddrPort("10.244.0.3:40000"),
	}
}

func TestDefaultFormatLineWithResponseFlags(t *testing.T) {
	ls, err := Compile([]*accesslogv3.AccessLog{fileLog(t, &filev3.FileAccessLog{Path: "/dev/null"})})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "default_format", []byte(ls[0].Render(sample())))
}

func TestFlagsPrintInEnvoysOrder(t *testing.T) {
	for _, tc := range []struct {
		f    Flags
		want string
	}{
		{0, "-"},
		{NoRouteFound, "NR"},
		{UpstreamRetryLimitExceeded | UpstreamOverflow, "UO,URX"},
		{FaultInjected | DelayInjected, "DI,FI"},
		{NoHealthyUpstream | UpstreamRequestTimeout | UpstreamConnectionFailure | DownstreamConnectionTermination, "UH,UT,UF,DC"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%d = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestTextAndJSONFormats(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.log")
	js := filepath.Join(dir, "json.log")
	jf, _ := structpb.NewStruct(map[string]any{
		"code": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%", "host": "%UPSTREAM_HOST%", "ua": "%REQ(USER-AGENT)%",
		"missing": "%REQ(X-NOPE)%", "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "mixed": "at %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
		"nested": map[string]any{"rid": "%REQ(X-REQUEST-ID):2%"},
	})
	ls, err := Compile([]*accesslogv3.AccessLog{
		fileLog(t, &filev3.FileAccessLog{Path: text, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
				InlineString: "%RESPONSE_CODE% %RESPONSE_FLAGS% 100%% %UPSTREAM_CLUSTER% %DOWNSTREAM_LOCAL_ADDRESS% %ROUTE_NAME%\n"}}}}}}),
		fileLog(t, &filev3.FileAccessLog{Path: js, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: jf}}}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	LogAll(ls, sample())
	got, _ := os.ReadFile(text)
	if want := "503 UO,URX 100% outbound|9080|v1|reviews.default.svc.cluster.local 10.96.0.10:9080 -\n"; string(got) != want {
		t.Errorf("text line %q, want %q", got, want)
	}
	got, _ = os.ReadFile(js)
	if want := `{"code":503,"flags":"UO,URX","host":"10.0.0.5:9080","missing":null,"mixed":"at 10.244.0.3","nested":{"rid":"ri"},"path":"/orig","ua":"curl/8"}` + "\n"; string(got) != want {
		t.Errorf("json line\n got %s\nwant %s", got, want)
	}
}

func TestCompileRefusesWhatIsNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(t *testing.T) *accesslogv3.AccessLog
		want string
	}{
		{"unknown command operator", func(t *testing.T) *accesslogv3.AccessLog {
			t.Helper()
			return fileLog(t, &filev3.FileAccessLog{Path: "/dev/null", AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
					Specifier: &corev3.DataSource_InlineString{InlineString: "%NOT_A_THING%"}}}}}})
		}, "not supported field in StreamInfo: NOT_A_THING"},
		{"access log duration filter", func(t *testing.T) *accesslogv3.AccessLog {
			t.Helper()
			l := fileLog(t, &filev3.FileAccessLog{Path: "/dev/null"})
			l.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_DurationFilter{DurationFilter: &accesslogv3.DurationFilter{}}}
			return l
		}, "access_log[0].filter.duration_filter: field is not supported"},
		{"access log filter without a specifier", func(t *testing.T) *accesslogv3.AccessLog {
			t.Helper()
			l := fileLog(t, &filev3.FileAccessLog{Path: "/dev/null"})
			l.Filter = &accesslogv3.AccessLogFilter{}
			return l
		}, "access_log[0].filter: a response_flag_filter or status_code_filter is required"},
		{"access log unknown response flag", func(t *testing.T) *accesslogv3.AccessLog {
			t.Helper()
			l := fileLog(t, &filev3.FileAccessLog{Path: "/dev/null"})
			l.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"XX"}}}}
			return l
		}, `access_log[0].filter.response_flag_filter.flags[0]: unknown response flag "XX"`},
		{"other logger", func(t *testing.T) *accesslogv3.AccessLog {
			t.Helper()
			a, _ := anypb.New(&corev3.DataSource{})
			return &accesslogv3.AccessLog{Name: "x", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: a}}
		}, "unsupported access logger x"},
		{"custom start time", func(t *testing.T) *accesslogv3.AccessLog {
			t.Helper()
			return fileLog(t, &filev3.FileAccessLog{Path: "/dev/null", AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
				//nolint:staticcheck // the deprecated text_format, which Envoy still accepts, must reach the same parser
				Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%START_TIME(%s)%"}}}})
		}, "custom START_TIME formats are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile([]*accesslogv3.AccessLog{proto.Clone(tc.log(t)).(*accesslogv3.AccessLog)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzFormat parses arbitrary format strings: an error or a renderable format, never a
// panic.
func FuzzFormat(f *testing.F) {
	f.Add(DefaultFormat)
	f.Add("%REQ(a?b):3% %% %RESP(:status)%")
	f.Add("%REQ(x):-1%%")
	f.Fuzz(func(t *testing.T, s string) {
		ft, err := parseFormat(s)
		if err != nil {
			return
		}
		_ = ft.render(sample())
	})
}
