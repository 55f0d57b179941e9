package demoapp

import (
	"net/http"
	"net/http/httptest"
	"slices"
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
		{ExternalWikipediaEN, "/wiki/Main_Page", true, http.StatusOK, "", "<title>Wikipedia, the free encyclopedia</title>"},
		{ExternalWikipediaDE, "/wiki/Wikipedia:Hauptseite", true, http.StatusOK, "", "<title>Wikipedia – Die freie Enzyklopädie</title>"},
		{ExternalWikipediaWWW, "/", true, http.StatusOK, "", "<title>Wikipedia</title>"},
		{ExternalWikipediaEN, "/wiki/Main_Page", false, http.StatusMovedPermanently, "https://en.wikipedia.org/wiki/Main_Page", ""},
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
	// Every Wikipedia server serves every site by the request's Host (the wildcard page
	// sends en.wikipedia.org's request to www.wikipedia.org's address); a language the
	// world has not is 404.
	h, err := ExternalHandler(ExternalWikipediaWWW, true)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{ExternalWikipediaEN: http.StatusOK, "fr.wikipedia.org": http.StatusNotFound} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "https://"+host+"/wiki/Main_Page", nil)
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("www.wikipedia.org's server answered Host %s with %d, want %d", host, rec.Code, want)
		}
	}
	if got := ExternalCertNames(ExternalWikipediaDE); !slices.Equal(got, []string{"*.wikipedia.org", "wikipedia.org"}) {
		t.Errorf("de.wikipedia.org's certificate names %v", got)
	}
	if _, err := ExternalHandler("example.org", false); err == nil {
		t.Error("an unknown host got a handler")
	}
}
