package discovery

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestADSNotRespondingIsDebug: go-control-plane's "ADS mode: not responding" follows
// every apply and is no fault, so the lab's terminal (warn level) does not show it; other
// warnings still show.
func TestADSNotRespondingIsDebug(t *testing.T) {
	var buf bytes.Buffer
	a := slogAdapter{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	a.Warnf("ADS mode: not responding to request %s %v: %v", "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
		[]string{"outbound|8080|v1|backend.default.svc.cluster.local"}, `"outbound|8080|v1|backend.default.svc.cluster.local" not listed`)
	if buf.Len() != 0 {
		t.Errorf("logged at warn level: %s", buf.String())
	}
	a.Warnf("stream %d: %s", 3, "something else")
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "stream 3: something else") {
		t.Errorf("another warning was not logged at warn: %q", buf.String())
	}
	buf.Reset()
	a = slogAdapter{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	a.Warnf("ADS mode: not responding to request %s %v: %v", "t", []string{"c"}, "not listed")
	if !strings.Contains(buf.String(), "level=DEBUG") {
		t.Errorf("at debug level the message is gone: %q", buf.String())
	}
}
