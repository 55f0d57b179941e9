package envoylog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestApplicationLogFormatsAsSpdlog(t *testing.T) {
	e := &Entry{Time: time.Date(2026, 1, 2, 3, 4, 5, 6789000, time.UTC), Level: slog.LevelError, Logger: "upstream",
		Message: "say \"hi\"\nnow", PID: 42}
	for _, tc := range []struct{ pattern, want string }{
		{"[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v", "[2026-01-02 03:04:05.006][42][error][upstream] [:] say \"hi\"\nnow\n"},
		{"%L %H%M%S.%f %_", "E 030405.006789 say \"hi\"\\nnow\n"},
		{"{\"msg\":\"%j\"} 100%%", "{\"msg\":\"say \\\"hi\\\"\\nnow\"} 100%\n"},
	} {
		f, err := ParseTextFormat(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got := f.Render(e); got != tc.want {
			t.Errorf("%q rendered %q, want %q", tc.pattern, got, tc.want)
		}
	}
	if _, err := ParseTextFormat("%Q"); err == nil || !strings.Contains(err.Error(), "%Q is not supported") {
		t.Errorf("unknown flag: %v", err)
	}
}

func TestJSONApplicationLogFormat(t *testing.T) {
	f, err := ParseJSONFormat(map[string]any{"time": "%Y-%m-%dT%T.%fZ", "level": "%l", "scope": "envoy %n", "msg": "%j"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h := NewHandler(&buf, NewLevels(slog.LevelInfo), 9)
	h.SetFormat(f)
	slog.New(h).With("component", "config").Warn("stream closed", "code", 14)
	var got map[string]string
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not one JSON object: %q: %v", buf.String(), err)
	}
	if got["level"] != "warning" || got["scope"] != "envoy config" || got["msg"] != "stream closed code=14" || !strings.HasSuffix(got["time"], "Z") {
		t.Errorf("line %v", got)
	}
	if _, err := ParseJSONFormat(map[string]any{"n": 1.0}); err == nil {
		t.Error("a non-string json_format value was accepted")
	}
}
