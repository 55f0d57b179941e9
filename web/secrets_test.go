package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

type fakeSecrets struct{ deadline bool }

func (f *fakeSecrets) ProxySecrets(ctx context.Context) []api.PodSecrets {
	_, f.deadline = ctx.Deadline()
	return []api.PodSecrets{
		{Pod: "a", Secrets: []api.ProxySecret{{Name: "default", Kind: "certificate", Version: "01", LastUpdated: time.Unix(1, 0).UTC()}}},
		{Pod: "b", Error: "read the proxy's secrets: connection refused"},
	}
}

// TestSecretsRoutes serves the proxies' secrets as JSON, with a deadline on the reader.
func TestSecretsRoutes(t *testing.T) {
	f := &fakeSecrets{}
	h := NewHandler(&fakeBackend{}, slog.New(slog.DiscardHandler), SecretsRoutes(f))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/proxy-secrets", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got []api.PodSecrets
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Secrets[0].Version != "01" || got[0].Secrets[0].Kind != "certificate" || got[1].Error == "" {
		t.Errorf("answer %s", rec.Body)
	}
	if !f.deadline {
		t.Error("the reader got no deadline: one stuck proxy would hold the request")
	}
}

// TestAnsweredBy tells the app, an upstream and the sidecar apart.
func TestAnsweredBy(t *testing.T) {
	timed := http.Header{"X-Envoy-Upstream-Service-Time": {"3"}}
	for _, c := range []struct {
		name    string
		h       http.Header
		pod     string
		sidecar bool
		want    string
	}{
		{name: "app names its pod", h: timed, pod: "backend-v1", sidecar: true, want: api.AnsweredByApp},
		{name: "upstream names none", h: timed, sidecar: true, want: api.AnsweredByUpstream},
		{name: "local reply", h: http.Header{}, sidecar: true, want: api.AnsweredBySidecar},
		{name: "no sidecar", h: http.Header{}, sidecar: false, want: api.AnsweredByUpstream},
	} {
		if got := api.AnsweredBy(c.h, c.pod, c.sidecar); got != c.want {
			t.Errorf("%s: AnsweredBy = %q, want %q", c.name, got, c.want)
		}
	}
}
