package accesslog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
)

// TestResponseFlagFilterWritesOnlyFlaggedEntries: Istio's listener access log carries a
// response_flag_filter for NR; Envoy writes only the entries with one of the flags, and
// an empty flag list means any flag.
func TestResponseFlagFilterWritesOnlyFlaggedEntries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string // the paths logged
	}{
		{name: "NR only", flags: []string{"NR"}, want: []string{"/nr"}},
		{name: "UH or NR", flags: []string{"UH", "NR"}, want: []string{"/nr", "/uh"}},
		{name: "any flag", flags: nil, want: []string{"/nr", "/uh"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.log")
			l := fileLog(t, &filev3.FileAccessLog{Path: path})
			l.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
				ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: tc.flags}}}
			ls, err := Compile([]*accesslogv3.AccessLog{l})
			if err != nil {
				t.Fatal(err)
			}
			LogAll(ls, &Info{Method: "GET", Path: "/ok", Code: 200})
			LogAll(ls, &Info{Method: "GET", Path: "/nr", Code: 404, Flags: NoRouteFound})
			LogAll(ls, &Info{Method: "GET", Path: "/uh", Code: 503, Flags: NoHealthyUpstream})
			b, _ := os.ReadFile(path)
			var got []string
			for _, p := range []string{"/ok", "/nr", "/uh"} {
				if strings.Contains(string(b), "GET "+p+" ") {
					got = append(got, p)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("logged %v, want %v:\n%s", got, tc.want, b)
			}
		})
	}
}
