package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
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
		switch {
		case errors.Is(err, ErrRenewalPaused):
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()}, log)
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			writeJSON(w, http.StatusGatewayTimeout, map[string]string{"error": err.Error()}, log)
		case err != nil:
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()}, log)
		default:
			writeJSON(w, http.StatusOK, st, log)
		}
	})
	mux.HandleFunc("POST /certs/pause", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.setPaused(true), log)
	})
	mux.HandleFunc("POST /certs/resume", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.setPaused(false), log)
	})
	return mux
}
