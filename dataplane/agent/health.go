package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// readiness decides whether the pod is ready, as pilot-agent's /healthz/ready does: the
// serving proxy epoch is live, its admin /ready says LIVE, and it has accepted at least
// one LDS and one CDS update. Once a newer epoch was started (a hot restart), the live
// parent keeps serving and the pod stays ready: the admin API then answers for the
// child, or for nobody if the child failed after taking it over, so it is not asked.
type readiness struct {
	serving func() (st agentapi.EpochStatus, handedOver, ok bool) // epochManager.serving
	admin   adminClient
}

// check returns nil when ready, else an error saying why not.
func (r readiness) check(ctx context.Context) error {
	ep, handedOver, ok := r.serving()
	if !ok {
		return errors.New("no proxy running")
	}
	if ep.State != agentapi.EpochLive {
		return fmt.Errorf("proxy epoch %d is %s", ep.Epoch, ep.State)
	}
	if handedOver {
		return nil
	}
	state, ok, err := r.admin.ready(ctx)
	if err != nil {
		return fmt.Errorf("proxy admin not reachable: %w", err)
	}
	if !ok {
		return fmt.Errorf("proxy state is %s", state)
	}
	stats, err := r.admin.counters(ctx, statLDSUpdateSuccess, statCDSUpdateSuccess)
	if err != nil {
		return fmt.Errorf("read proxy stats: %w", err)
	}
	for _, name := range []string{statCDSUpdateSuccess, statLDSUpdateSuccess} {
		if stats[name] == 0 {
			return fmt.Errorf("proxy has not accepted its first xDS config yet (%s is 0)", name)
		}
	}
	return nil
}

// healthHandler serves GET /healthz/ready on the status port: 200 when ready, else 503
// with the reason.
func healthHandler(r readiness) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := r.check(req.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
