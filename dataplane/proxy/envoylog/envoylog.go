// Package envoylog renders the proxy's slog records the way Envoy prints its log lines,
// "[2026-11-22 05:00:00.000][1234][info][main] message key=value", and maps Envoy's level
// names (trace debug info warning error critical off) to slog levels.
package envoylog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Envoy's levels beyond slog's four.
const (
	LevelTrace    = slog.LevelDebug - 4
	LevelCritical = slog.LevelError + 4
	LevelOff      = slog.LevelError + 100
)

// ParseLevel maps an Envoy level name to a slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch s {
	case "trace":
		return LevelTrace, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warning", "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	case "critical":
		return LevelCritical, nil
	case "off":
		return LevelOff, nil
	}
	return 0, fmt.Errorf("parse log level %q: want one of trace, debug, info, warning, error, critical, off", s)
}

// LevelName returns Envoy's name of a slog level.
func LevelName(l slog.Level) string {
	switch {
	case l >= LevelOff:
		return "off"
	case l >= LevelCritical:
		return "critical"
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warning"
	case l >= slog.LevelInfo:
		return "info"
	case l >= slog.LevelDebug:
		return "debug"
	}
	return "trace"
}

// Handler is a slog.Handler writing Envoy-shaped lines. The attribute "component" becomes
// the logger name ("main" when absent). Safe for concurrent use.
type Handler struct {
	w      *lockedWriter
	levels *Levels
	pid    int
	comp   string
	attrs  string
	group  string
	now    func() time.Time
}

type lockedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	format atomic.Pointer[Format] // nil: the default line
}

// SetFormat makes every handler sharing h's writer (h and those derived from it) render
// lines with f (application_log_config); nil restores the default line.
func (h *Handler) SetFormat(f *Format) { h.w.format.Store(f) }

// NewHandler returns a Handler writing to w for process pid, at the level levels holds
// for each logger name.
func NewHandler(w io.Writer, levels *Levels, pid int) *Handler {
	return &Handler{w: &lockedWriter{w: w}, levels: levels, pid: pid, comp: "main", now: time.Now}
}

// Enabled reports whether l is at or above the level of the handler's logger.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	min := h.levels.Get(h.comp)
	return l >= min && min < LevelOff
}

// Handle writes one line.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	t := r.Time
	if t.IsZero() {
		t = h.now()
	}
	f := h.w.format.Load()
	if f == nil {
		fmt.Fprintf(&b, "[%s][%d][%s][%s] ", t.UTC().Format("2006-01-02 15:04:05.000"), h.pid, LevelName(r.Level), h.comp)
	}
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, h.group, a)
		return true
	})
	line := b.String() + "\n"
	if f != nil {
		line = f.Render(&Entry{Time: t, Level: r.Level, Logger: h.comp, Message: b.String(), PID: h.pid})
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	_, err := io.WriteString(h.w.w, line)
	return err
}

func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	fmt.Fprintf(b, " %s=%v", key, a.Value.Resolve())
}

// WithAttrs returns a handler with the attributes added; "component" renames the logger.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		if a.Key == "component" && h.group == "" {
			c.comp = a.Value.String()
			continue
		}
		writeAttr(&b, h.group, a)
	}
	c.attrs = b.String()
	return &c
}

// WithGroup returns a handler that qualifies later attribute keys with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

var _ slog.Handler = (*Handler)(nil)
