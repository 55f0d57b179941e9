package web

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestApplyBodyLimit: an apply body above MaxConfigRequestBytes is refused with 413
// before the lab sees it.
func TestApplyBodyLimit(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeConfig{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, NewHandler(&fakeBackend{}, testutil.Logger(t), ConfigRoutes(f, f))) }()
	c := api.NewUnixClient(sock)
	t.Cleanup(func() {
		c.Close()
		cancel()
		<-done
	})
	_, err = c.Apply(ctx, []api.ConfigFile{{Name: "huge.yaml", Data: strings.Repeat("#", MaxConfigRequestBytes)}})
	if err == nil || !strings.Contains(err.Error(), "larger than the limit of 67108864 bytes") {
		t.Errorf("Apply of a body above the limit: err = %v", err)
	}
	if len(f.applied) != 0 {
		t.Errorf("the lab was sent %d files", len(f.applied))
	}
}
