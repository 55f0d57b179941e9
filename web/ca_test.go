package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

type fakeCABackend struct {
	mu      sync.Mutex
	offset  time.Duration
	renewed int
	paused  map[string]bool
	rotated []string
}

func (f *fakeCABackend) CAStatus(context.Context) (api.CAStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.CAStatus{Phase: "stable", ClockOffset: f.offset.String(), Signing: api.CARef{Serial: "r1"}}, nil
}

func (f *fakeCABackend) RotateRootWith(_ context.Context, cert, key []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cert == nil {
		return fmt.Errorf("rotate root: %w: need the new root", api.ErrCARequest)
	}
	f.rotated = append(f.rotated, string(cert)+"/"+string(key))
	return nil
}

func (f *fakeCABackend) SetCAClockOffset(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset = d
}

func (f *fakeCABackend) RenewCerts(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewed++
	return nil
}

func (f *fakeCABackend) PauseCertRenewal(pod string, paused bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pod != "backend-v1" {
		return fmt.Errorf("pod %q: %w", pod, api.ErrUnknownPod)
	}
	f.paused[pod] = paused
	return nil
}

func TestCARoutes(t *testing.T) {
	fb := &fakeCABackend{paused: map[string]bool{}}
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(NewHandler(&fakeBackend{}, testutil.Logger(t), CARoutes(fb)))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	c := api.NewUnixClient(sock)
	t.Cleanup(c.Close)
	ctx := context.Background()

	if st, err := c.CAStatus(ctx); err != nil || st.Signing.Serial != "r1" {
		t.Fatalf("CAStatus = %+v, %v", st, err)
	}
	if _, err := c.RotateRoot(ctx, nil, nil); err == nil || !strings.Contains(err.Error(), "need the new root") {
		t.Fatalf("RotateRoot refused = %v, want the backend's reason", err)
	}
	if _, err := c.RotateRoot(ctx, []byte("C"), []byte("K")); err != nil || len(fb.rotated) != 1 || fb.rotated[0] != "C/K" {
		t.Fatalf("RotateRoot(C, K) = %v, backend got %v", err, fb.rotated)
	}
	st, err := c.SetCAClock(ctx, -25*time.Hour, true)
	if err != nil || st.ClockOffset != "-25h0m0s" || fb.renewed != 1 {
		t.Fatalf("SetCAClock = %+v, %v (renewed %d)", st, err, fb.renewed)
	}
	if err := c.PauseCertRenewal(ctx, "backend-v1", true); err != nil || !fb.paused["backend-v1"] {
		t.Fatalf("PauseCertRenewal = %v", err)
	}
	if err := c.PauseCertRenewal(ctx, "backend-v1", false); err != nil || fb.paused["backend-v1"] {
		t.Fatalf("resume = %v", err)
	}
	if err := c.PauseCertRenewal(ctx, "nope", true); err == nil || !strings.Contains(err.Error(), "unknown pod") {
		t.Fatalf("pause unknown pod = %v", err)
	}
	// The client only sends durations; a hand-made body carries one that is not.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	t.Cleanup(hc.CloseIdleConnections)
	body, _ := json.Marshal(api.CAClockRequest{Offset: "soon"})
	resp, err := hc.Post("http://lab/v1/ca/clock", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(answer), "offset") {
		t.Fatalf("bad offset = %d %s", resp.StatusCode, answer)
	}
}
