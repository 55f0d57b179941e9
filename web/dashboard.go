package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// uiFiles are the dashboard's assets: plain HTML, CSS and JavaScript, all embedded, so
// the page works with no network and loads nothing from elsewhere.
//
//go:embed ui
var uiFiles embed.FS

// contentPolicy allows the page only its own assets and its own API.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Dashboard returns the handler served on TCP: the dashboard's assets at / and the API
// (api, as NewHandler built it) under /v1/, all behind g.
func Dashboard(api http.Handler, g Guard) http.Handler {
	assets, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	files := http.FileServerFS(assets)
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/metrics", api)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Security-Policy", contentPolicy)
		w.Header().Set("Cache-Control", "no-cache")
		if strings.HasSuffix(r.URL.Path, ".map") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
	return g.Wrap(mux)
}
