package demoapp

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"slices"
)

// The lab's outside world (lab/world.go) answers the hosts Istio's egress and TLS tasks
// reach outside the mesh. Each is an app of meshlab's own standing in for the real site:
// httpbin.org is the httpbin persona, edition.cnn.com and www.google.com serve a page of
// their own, Wikipedia's sites their titled pages (wikipedia.go). Only what the tasks look at is kept: edition.cnn.com redirects plain HTTP
// to HTTPS (301 with a Location on https://), as the TLS origination task shows, and
// every page says it is meshlab's stand-in.

// External hosts of the outside world.
const (
	ExternalHTTPBin = "httpbin.org"
	ExternalCNN     = "edition.cnn.com"
	ExternalGoogle  = "www.google.com"
	// ExternalExample is example.com, the second host of istio.io's ambient egress
	// gateway page.
	ExternalExample = "example.com"
)

// ExternalHosts are the outside world's hosts, in the order the world numbers them.
var ExternalHosts = []string{
	ExternalHTTPBin, ExternalCNN, ExternalGoogle, ExternalGitHubRaw,
	ExternalWikipediaWWW, ExternalWikipediaEN, ExternalWikipediaDE, ExternalExample,
}

// ExternalHandler returns the handler host serves on plain HTTP (port 80) or, with tls,
// on HTTPS (port 443). An unknown host is an error.
func ExternalHandler(host string, tls bool) (http.Handler, error) {
	if !slices.Contains(ExternalHosts, host) {
		return nil, fmt.Errorf("no outside-world app for host %q (known: %v)", host, ExternalHosts)
	}
	switch host {
	case ExternalHTTPBin:
		return newHTTPBin(nil), nil
	case ExternalGitHubRaw:
		return gitHubRaw(), nil // jwtsamples.go
	}
	if isWikipedia(host) {
		return wikipedia(tls), nil // wikipedia.go
	}
	page := externalPage(host)
	if host == ExternalCNN && !tls {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusMovedPermanently)
		}), nil
	}
	return page, nil
}

// externalPage is the HTML page of a site that is not httpbin: any path answers 200
// with a page naming the host and the path asked for (HEAD gets the headers alone).
func externalPage(host string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK)
			return
		}
		_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>"+html.EscapeString(host)+"</title></head>\n<body><h1>"+
			html.EscapeString(host)+"</h1>\n<p>meshlab's stand-in for "+html.EscapeString(host)+
			" in the lab's outside world: you asked for "+html.EscapeString(r.URL.Path)+
			" over "+scheme(r)+".</p></body></html>\n")
	})
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "HTTPS"
	}
	return "HTTP"
}
