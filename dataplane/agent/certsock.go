package agent

import (
	"log/slog"
	"net/http"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// withCertRoutes adds the certificate endpoints to agent.sock's handler h:
//
//	GET  /certs         the certificate status (as Status.Cert)
//	POST /certs/renew   get a new certificate now, with the CA's current trust bundle,
//	                    and push it over SDS; answers the new status (409 while paused,
//	                    502 when the CA refuses or cannot be reached)
//	POST /certs/pause   stop renewing (the certificate will expire; fault injection)
//	POST /certs/resume  renew again (at once if the certificate is due)
//
// The lab drives a root rotation through /certs/renew: see the package doc.
func withCertRoutes(h http.Handler, m *certManager, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET /certs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.snapshot(), log)
	})
	mux.HandleFunc("POST /certs/renew", func(w http.ResponseWriter, r *http.Request) {
		st, err := m.renew(r.Context())
		if err != nil {
			// 409 while paused, 504 when the request ended, else the CA failed: 502.
			writeJSON(w, agentapi.StatusCode(err, http.StatusBadGateway), map[string]string{"error": err.Error()}, log)
			return
		}
		writeJSON(w, http.StatusOK, st, log)
	})
	mux.HandleFunc("POST /certs/pause", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.setPaused(true), log)
	})
	mux.HandleFunc("POST /certs/resume", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.setPaused(false), log)
	})
	return mux
}
