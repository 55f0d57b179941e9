package web

import (
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

// serveUnix serves the API (the core endpoints over fakeBackend, plus features) on a unix
// socket as the lab serves api.sock, and returns the typed client of it; both close when
// the test ends.
func serveUnix(t *testing.T, features ...Routes) *api.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(NewHandler(&fakeBackend{}, testutil.Logger(t), features...))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	c := api.NewUnixClient(sock)
	t.Cleanup(c.Close)
	return c
}
