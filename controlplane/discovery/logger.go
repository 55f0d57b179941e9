package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	gcplog "github.com/envoyproxy/go-control-plane/pkg/log"
)

// slogAdapter routes go-control-plane's four-method logger into slog.
type slogAdapter struct {
	l *slog.Logger
}

var _ gcplog.Logger = slogAdapter{}

func (a slogAdapter) logf(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if a.l.Enabled(ctx, level) {
		a.l.Log(ctx, level, fmt.Sprintf(format, args...))
	}
}

// Debugf logs at debug level.
func (a slogAdapter) Debugf(format string, args ...any) { a.logf(slog.LevelDebug, format, args) }

// Infof logs at info level.
func (a slogAdapter) Infof(format string, args ...any) { a.logf(slog.LevelInfo, format, args) }

// Warnf logs at warn level, except go-control-plane's "ADS mode: not responding to
// request" (an EDS request naming a cluster the snapshot does not list yet or any more):
// in ADS every CDS change makes the proxy ask for the new set while the old request is
// answered, so it follows every apply and is no fault. It logs at debug.
func (a slogAdapter) Warnf(format string, args ...any) {
	level := slog.LevelWarn
	if strings.HasPrefix(format, "ADS mode: not responding to request") {
		level = slog.LevelDebug
	}
	a.logf(level, format, args)
}

// Errorf logs at error level.
func (a slogAdapter) Errorf(format string, args ...any) { a.logf(slog.LevelError, format, args) }
