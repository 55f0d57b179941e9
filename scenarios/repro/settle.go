package repro

import (
	"context"
	"time"

	"github.com/meshlab/meshlab/api"
)

// ProxyStatusReader lists the proxies' xDS state; *api.Client implements it.
type ProxyStatusReader interface {
	ProxyStatus(ctx context.Context) ([]api.ProxyStatus, error)
}

// Settle waits, up to timeout, until every proxy is connected and has answered (ACK or
// NACK) the last version of every type it was sent, so that Collect reads a rebuilt
// lab's answers rather than pushes in flight. It reports whether they settled.
func Settle(ctx context.Context, src ProxyStatusReader, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if all, err := src.ProxyStatus(ctx); err == nil && synced(all) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

func synced(all []api.ProxyStatus) bool {
	for _, p := range all {
		if !p.Connected || len(p.Types) == 0 {
			return false
		}
		for _, t := range p.Types {
			if t.Sent != "" && t.Sent != t.Acked && t.NackError == "" { // an answer pending

				return false
			}
		}
	}
	return true
}
