package lab

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestRenderProxyVersions(t *testing.T) {
	t.Parallel()
	got := renderProxyVersions([]ProxyInfo{{IstioVersion: "b"}, {IstioVersion: "a"}, {IstioVersion: "b"}})
	if got != "a (1 proxies), b (2 proxies)" {
		t.Errorf("got %q", got)
	}
}

func TestBuildInfoOf(t *testing.T) {
	t.Parallel()
	if got := BuildInfoOf(nil, "1.0.0-dev"); got.Version != "1.0.0-dev" || got.GitRevision != "unknown" {
		t.Errorf("no build info: %+v", got)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}}
	if got := BuildInfoOf(bi, "1.0.0-dev"); got != (BuildInfo{Version: "1.2.3", GitRevision: "abc", GolangVersion: "go1.26", BuildStatus: "Modified", GitTag: "1.2.3"}) {
		t.Errorf("tagged, modified: %+v", got)
	}
}

// TestWriteVersionOfALabThatCannotSay: the client's version is printed, then the lab's
// error (its record is missing) names the lab.
func TestWriteVersionOfALabThatCannotSay(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := WriteVersion(t.Context(), &out, VersionOptions{Release: "1.0.0-dev", RunRoot: t.TempDir(), Lab: "gone", Short: true})
	if err == nil || !strings.HasPrefix(err.Error(), "lab gone: ") {
		t.Errorf("err = %v, want one naming lab gone", err)
	}
	if !strings.HasPrefix(out.String(), "client version: ") {
		t.Errorf("printed %q, want the client's version first", out.String())
	}
	if err := WriteVersion(t.Context(), &out, VersionOptions{Output: "table"}); err == nil || err.Error() != `-o "table": want json or yaml` {
		t.Errorf("-o table: %v", err)
	}
}
