package envoylog

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
)

// Loggers are the logger names the proxy uses, a subset of Envoy's.
var Loggers = []string{"admin", "config", "conn_handler", "connection", "filter", "http", "main", "pool", "rbac", "router", "upstream"}

// Levels holds one level per logger name, changed at run time by -l,
// --component-log-level and POST /logging. Safe for concurrent use.
type Levels struct {
	mu     sync.RWMutex
	levels map[string]slog.Level
}

// NewLevels returns Levels with every known logger at l.
func NewLevels(l slog.Level) *Levels {
	lv := &Levels{levels: map[string]slog.Level{}}
	lv.SetAll(l)
	return lv
}

// SetAll sets every logger to l.
func (lv *Levels) SetAll(l slog.Level) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	for _, n := range Loggers {
		lv.levels[n] = l
	}
}

// Set sets one logger; it returns an error for a name the proxy does not have.
func (lv *Levels) Set(name string, l slog.Level) error {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if _, ok := lv.levels[name]; !ok {
		return fmt.Errorf("set log level: unknown logger %q", name)
	}
	lv.levels[name] = l
	return nil
}

// Get returns the level of a logger (info for an unknown one).
func (lv *Levels) Get(name string) slog.Level {
	lv.mu.RLock()
	defer lv.mu.RUnlock()
	if l, ok := lv.levels[name]; ok {
		return l
	}
	return slog.LevelInfo
}

// ParseComponentLevels parses --component-log-level "upstream:debug,connection:trace".
func ParseComponentLevels(s string) (map[string]slog.Level, error) {
	out := map[string]slog.Level{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, lvl, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("parse component log level %q: want <logger>:<level>", part)
		}
		l, err := ParseLevel(lvl)
		if err != nil {
			return nil, err
		}
		out[name] = l
	}
	return out, nil
}

// Render writes Envoy's "active loggers:" listing.
func (lv *Levels) Render() string {
	lv.mu.RLock()
	defer lv.mu.RUnlock()
	names := make([]string, 0, len(lv.levels))
	for n := range lv.levels {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("active loggers:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: %s\n", n, LevelName(lv.levels[n]))
	}
	return b.String()
}
