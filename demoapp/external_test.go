package demoapp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExternalHandlers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host, path string
		tls        bool
		status     int
		location   string
		body       string
	}{
		{ExternalCNN, "/politics", false, http.StatusMovedPermanently, "https://edition.cnn.com/politics", ""},
		{ExternalCNN, "/politics", true, http.StatusOK, "", "edition.cnn.com"},
		{ExternalGoogle, "/", true, http.StatusOK, "", "www.google.com"},
		{ExternalGoogle, "/", false, http.StatusOK, "", "over HTTP"},
		{ExternalHTTPBin, "/status/418", false, http.StatusTeapot, "", "teapot"},
		{ExternalHTTPBin, "/headers", true, http.StatusOK, "", `"headers"`},
	} {
		h, err := ExternalHandler(tc.host, tc.tls)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://"+tc.host+tc.path, nil))
		if rec.Code != tc.status || rec.Header().Get("Location") != tc.location || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s%s (tls %v) = %d location %q body %q; want %d, location %q, body containing %q",
				tc.host, tc.path, tc.tls, rec.Code, rec.Header().Get("Location"), rec.Body.String(), tc.status, tc.location, tc.body)
		}
	}
	if _, err := ExternalHandler("example.com", false); err == nil {
		t.Error("an unknown host got a handler")
	}
}
