package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
)

// errRestarter answers every restart with its error (validation on PUT first, as the
// epoch manager does).
type errRestarter struct{ err error }

func (r errRestarter) Restart(_ context.Context, s *agentapi.ProxySettings) (agentapi.RestartResult, error) {
	if s != nil {
		if err := validateSettings(*s); err != nil {
			return agentapi.RestartResult{Epoch: -1}, err
		}
	}
	return agentapi.RestartResult{Epoch: -1}, r.err
}

// TestAgentAPIClient drives agent.sock's real handlers over a unix socket with the one
// client the lab and the CLI use, and checks that each refusal of the agent arrives as
// the sentinel the agent returned (errors.Is), not as text to match.
func TestAgentAPIClient(t *testing.T) {
	t.Parallel()
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "cluster.outbound|80||b.upstream_rq_total: 4\nfilter: 1\nh: P0(nan,1) P50(nan,2)\n")
		if f := r.URL.Query().Get("filter"); f != "" {
			fmt.Fprintf(w, "filter.seen.%d: %d\n", len(f), len(f))
		}
	}))
	t.Cleanup(admin.Close)
	adminPort := uint16(admin.Listener.Addr().(*net.TCPAddr).Port)

	f := startSDS(t, time.Hour)
	status := func(context.Context) agentapi.Status { return agentapi.Status{Pod: "backend-v1", Ready: true} }
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	log := testutil.Logger(t)
	h := withCertRoutes(sockHandler(status, neverChanges, errRestarter{err: fmt.Errorf("restart: %w", agentapi.ErrStopping)}, adminPort, log), f.certs, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveHTTP(ctx, ln, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	c := agentapi.NewClient(path)
	t.Cleanup(c.Close)
	tctx, tcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer tcancel()

	if st, err := c.Status(tctx); err != nil || st.Pod != "backend-v1" || !st.Ready {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if st, err := c.WaitReady(tctx, 5*time.Second); err != nil || !st.Ready {
		t.Fatalf("WaitReady = %+v, %v", st, err)
	}
	if _, err := c.WaitReady(tctx, time.Hour); !errors.Is(err, agentapi.ErrBadRequest) {
		t.Errorf("WaitReady beyond the agent's bound = %v, want ErrBadRequest", err)
	}
	first, err := c.RenewCert(tctx)
	if err != nil || first.Serial == "" {
		t.Fatalf("RenewCert = %+v, %v", first, err)
	}
	if st, err := c.PauseRenewal(tctx, true); err != nil || !st.Paused {
		t.Fatalf("PauseRenewal(true) = %+v, %v", st, err)
	}
	_, err = c.RenewCert(tctx)
	var apiErr *agentapi.Error
	if !errors.Is(err, agentapi.ErrRenewalPaused) || !errors.As(err, &apiErr) || apiErr.Code != http.StatusConflict ||
		apiErr.Message != agentapi.ErrRenewalPaused.Error() || apiErr.Path != agentapi.PathCertsRenew {
		t.Errorf("RenewCert while paused = %v (%+v), want agentapi.ErrRenewalPaused from a 409", err, apiErr)
	}
	if st, err := c.Cert(tctx); err != nil || st.Serial != first.Serial || !st.Paused {
		t.Errorf("Cert while paused = %+v, %v; want the first certificate, paused", st, err)
	}
	if st, err := c.PauseRenewal(tctx, false); err != nil || st.Paused {
		t.Errorf("PauseRenewal(false) = %+v, %v", st, err)
	}

	if _, err := c.Restart(tctx); !errors.Is(err, agentapi.ErrStopping) {
		t.Errorf("Restart while stopping = %v, want agentapi.ErrStopping", err)
	}
	if _, err := c.SetProxyConfig(tctx, agentapi.ProxySettings{LogLevel: "loud"}); !errors.Is(err, agentapi.ErrBadRequest) {
		t.Errorf("SetProxyConfig with a bad level = %v, want ErrBadRequest", err)
	} else if !errors.As(err, &apiErr) || apiErr.Message == "" {
		t.Errorf("SetProxyConfig's error carries no message: %+v", apiErr)
	}

	st, err := c.Stats(tctx, `^cluster\.outbound\|`)
	if err != nil {
		t.Fatal(err)
	}
	if st.Values["cluster.outbound|80||b.upstream_rq_total"] != 4 || st.Values["filter.seen.20"] != 20 || len(st.Histograms["h"].Points) != 2 {
		t.Errorf("Stats = %+v, want the counter, the filter arriving whole (20 bytes) and the histogram", st)
	}
	admin.Close()
	if _, err := c.AdminBytes(tctx, "ready"); !errors.Is(err, agentapi.ErrUpstream) {
		t.Errorf("admin down: %v, want ErrUpstream (502)", err)
	}
	if _, err := c.Cert(tctx); err != nil {
		t.Errorf("the agent still answers with the admin down: %v", err)
	}
}
