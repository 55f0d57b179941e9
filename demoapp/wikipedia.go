package demoapp

import (
	"html"
	"io"
	"net/http"
	"strings"
)

// Wikipedia's sites in the lab's outside world, as the egress pages reach them
// (wildcard-egress-hosts, http-proxy, egress-kubernetes-services): every language's
// site is served by every Wikipedia server, which tells the sites apart by the request's
// Host, and each server's certificate names *.wikipedia.org and wikipedia.org. The
// wildcard page depends on that: it routes *.wikipedia.org to www.wikipedia.org's
// address, and en.wikipedia.org's page still comes back. Each host still has an address
// of its own in the world, as each has in DNS.

// Wikipedia's hosts of the outside world.
const (
	ExternalWikipediaWWW = "www.wikipedia.org"
	ExternalWikipediaEN  = "en.wikipedia.org"
	ExternalWikipediaDE  = "de.wikipedia.org"
)

// wikipediaTitles are the sites' page titles, as the pages' greps print them.
var wikipediaTitles = map[string]string{
	ExternalWikipediaWWW: "Wikipedia",
	ExternalWikipediaEN:  "Wikipedia, the free encyclopedia",
	ExternalWikipediaDE:  "Wikipedia – Die freie Enzyklopädie",
}

// ExternalCertNames returns the DNS names of host's certificate in the outside world:
// Wikipedia's hosts share *.wikipedia.org and wikipedia.org, the others name themselves.
func ExternalCertNames(host string) []string {
	if isWikipedia(host) {
		return []string{"*.wikipedia.org", "wikipedia.org"}
	}
	return []string{host}
}

func isWikipedia(host string) bool { return strings.HasSuffix(host, ".wikipedia.org") }

// wikipedia answers any Wikipedia site by the request's Host: its page, titled as the
// real site's, naming the path asked for; a host that is no site of the world's is 404,
// as Wikipedia answers an unknown language's. Plain HTTP redirects to HTTPS (301), as
// Wikipedia's servers do.
func wikipedia(tls bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
		if !tls {
			http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusMovedPermanently)
			return
		}
		title, ok := wikipediaTitles[host]
		if !ok {
			http.Error(w, "no Wikipedia site "+host+" in the lab's outside world", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK)
			return
		}
		_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head>\n<meta charset=\"UTF-8\">\n<title>"+html.EscapeString(title)+"</title>\n</head>\n<body><h1>"+
			html.EscapeString(host)+"</h1>\n<p>meshlab's stand-in for "+html.EscapeString(host)+
			" in the lab's outside world: you asked for "+html.EscapeString(r.URL.Path)+" over "+scheme(r)+".</p></body></html>\n")
	})
}
