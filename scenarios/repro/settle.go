package repro

import (
	"context"
	"maps"
	"slices"
	"strings"
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
	// Synced twice in a row with nothing sent in between: a proxy asks for RDS and EDS
	// only once it has applied the LDS and CDS that name them, so right after those ACKs
	// it looks answered with its routes not yet sent.
	last := ""
	for {
		if all, err := src.ProxyStatus(ctx); err == nil && synced(all) {
			v := sentVersions(all)
			if v == last {
				return true
			}
			last = v
		} else {
			last = ""
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

// sentVersions lists every proxy's sent version of every type, in a stable order.
func sentVersions(all []api.ProxyStatus) string {
	var b strings.Builder
	for _, p := range all {
		b.WriteString(p.NodeID)
		for _, t := range slices.Sorted(maps.Keys(p.Types)) {
			b.WriteString(" " + t + "=" + p.Types[t].Sent)
		}
		b.WriteString("\n")
	}
	return b.String()
}
