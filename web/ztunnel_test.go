package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

type fakeZtunnel struct {
	body []byte
	err  error
	path string
}

func (f *fakeZtunnel) ZtunnelAdminGet(_ context.Context, path string) ([]byte, error) {
	f.path = path
	return f.body, f.err
}

func TestZtunnelConfigDumpRoute(t *testing.T) {
	t.Parallel()
	fz := &fakeZtunnel{}
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(NewHandler(&fakeBackend{}, testutil.Logger(t), ZtunnelRoutes(fz)))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	c := api.NewUnixClient(sock)
	t.Cleanup(c.Close)
	ctx := context.Background()

	fz.body = []byte(`{"workloads": [], "services": []}`)
	got, err := c.ZtunnelConfigDump(ctx)
	if err != nil || string(got) != string(fz.body) || fz.path != "/config_dump" {
		t.Fatalf("ZtunnelConfigDump = %s, %v (asked %q)", got, err, fz.path)
	}
	cases := []struct {
		name  string
		body  []byte
		err   error
		class error
		text  string
	}{
		{"no ztunnel", nil, api.ErrNoZtunnel, api.ErrConflict, "no ztunnel: no pod is in ambient mode"},
		{"ztunnel too slow", nil, fmt.Errorf("ztunnel admin: %w", context.DeadlineExceeded), api.ErrTimeout, "ztunnel admin: context deadline exceeded"},
		{"ztunnel broken", nil, errors.New("dial ztunnel admin: refused"), api.ErrInternal, "dial ztunnel admin: refused"},
		{"not JSON", []byte("<html>"), nil, api.ErrInternal, "ztunnel's /config_dump is not JSON"},
	}
	for _, tc := range cases {
		fz.body, fz.err = tc.body, tc.err
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.ZtunnelConfigDump(ctx)
		cancel()
		if !errors.Is(err, tc.class) || err.Error() != tc.text {
			t.Errorf("%s: err = %v, want %q of class %v", tc.name, err, tc.text, tc.class)
		}
	}
	if !errors.Is(api.ErrNoZtunnel, api.ErrConflict) {
		t.Error("ErrNoZtunnel is not a conflict")
	}
}
