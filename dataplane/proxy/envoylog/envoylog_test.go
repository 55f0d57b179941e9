package envoylog

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"testing"
)

func TestHandlerWritesEnvoyShapedLinesPerLoggerLevel(t *testing.T) {
	var b bytes.Buffer
	levels := NewLevels(slog.LevelInfo)
	log := slog.New(NewHandler(&b, levels, 42))
	log.Info("starting", "port", 15000)
	log.With("component", "upstream").Debug("hidden")
	if err := levels.Set("upstream", slog.LevelDebug); err != nil {
		t.Fatal(err)
	}
	log.With("component", "upstream").Debug("shown")
	log.Log(context.Background(), LevelCritical, "boom")
	want := regexp.MustCompile(`^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\]\[42\]\[info\]\[main\] starting port=15000\n` +
		`\[[^\]]+\]\[42\]\[debug\]\[upstream\] shown\n` +
		`\[[^\]]+\]\[42\]\[critical\]\[main\] boom\n$`)
	if !want.Match(b.Bytes()) {
		t.Errorf("log output:\n%s", b.String())
	}
	if err := levels.Set("nope", slog.LevelInfo); err == nil {
		t.Error("unknown logger accepted")
	}
	for _, n := range []string{"trace", "debug", "info", "warning", "warn", "error", "critical", "off"} {
		l, err := ParseLevel(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := LevelName(l); got != n && (n != "warn" || got != "warning") {
			t.Errorf("LevelName(ParseLevel(%q)) = %q", n, got)
		}
	}
}
