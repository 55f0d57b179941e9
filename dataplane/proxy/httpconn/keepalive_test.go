package httpconn

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
)

// TestKeepAlivePOSTsStreamedUpstreamKeepTheConnection: a POST without a retry policy is
// streamed to the upstream by http.Transport, which closes the request body itself. The
// downstream connection must still carry the next request (it used to be closed once
// in a few runs, and the client's next POST was reset).
func TestKeepAlivePOSTsStreamedUpstreamKeepTheConnection(t *testing.T) {
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "up", up)}, routeTo(prefix("/"), to("up")))
	for i := 0; i < 60; i++ {
		req, _ := http.NewRequest("POST", "http://"+l.addr+"/x", strings.NewReader("abcde"))
		resp, err := l.client.Do(req)
		if err != nil {
			t.Fatalf("POST %d on a kept-alive connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := l.store.Value("http.lab.downstream_cx_total"); got != 1 {
		t.Errorf("downstream_cx_total = %d, want 1 (every POST on one connection)", got)
	}
}
