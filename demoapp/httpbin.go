package demoapp

import (
	"cmp"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The httpbin persona answers as httpbin (the image Istio's samples/httpbin runs, and
// httpbin.org, which Istio's egress tasks call), for the endpoints those tasks use:
// /get, /headers, /ip, /user-agent, /status/{codes}, /delay/{n}, /anything, /uuid,
// /bytes/{n}, /response-headers and /html. Answers are JSON with httpbin's field names and
// header names in canonical form with one string value each, so that a task's documented
// output (`"X-Envoy-Attempt-Count": "1"`, the teapot of /status/418) is what a learner sees.

// httpbinMaxDelay is the longest /delay/{n} waits, as httpbin caps it.
const httpbinMaxDelay = 10 * time.Second

// httpbinMaxBody bounds what /anything reads of a request body.
const httpbinMaxBody = 1 << 20

// teapot is httpbin's answer to /status/418.
const teapot = `
    -=[ teapot ]=-

       _...._
     .'  _ _ ` + "`" + `.
    | ."` + "`" + ` ^ ` + "`" + `". _,
    \_;` + "`" + `"---"` + "`" + `|//
      |       ;/
      \_     _/
        ` + "`" + `"""` + "`" + `
`

// newHTTPBin returns the httpbin persona's handler. rnd picks among the codes of
// /status/{codes}; nil uses a random source.
func newHTTPBin(rnd *rand.Rand) *http.ServeMux {
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	b := &httpbin{rnd: rnd}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /{$}", serveHTTPBinIndex)
	mux.HandleFunc("GET /html", serveHTTPBinIndex)
	mux.HandleFunc("GET /get", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, echo(r)) })
	mux.HandleFunc("GET /headers", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"headers": headerMap(r)})
	})
	mux.HandleFunc("GET /ip", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"origin": origin(r)})
	})
	mux.HandleFunc("GET /user-agent", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"user-agent": r.UserAgent()})
	})
	mux.HandleFunc("GET /uuid", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"uuid": newUUID()})
	})
	mux.HandleFunc("GET /bytes/{n}", serveBytes)
	mux.HandleFunc("GET /response-headers", serveResponseHeaders)
	mux.HandleFunc("/status/{codes}", b.serveStatus)
	mux.HandleFunc("/delay/{n}", serveDelay)
	// The method endpoints echo as /anything does; another method gets httpbin's 405.
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		mux.HandleFunc(m+" /"+strings.ToLower(m), serveAnything)
	}
	mux.HandleFunc("/anything", serveAnything)
	mux.HandleFunc("/anything/{rest...}", serveAnything)
	outer := http.NewServeMux()
	outer.Handle("/", httpbinCORS(mux))
	return outer
}

// httpbinCORS sets the CORS headers httpbin's set_cors_headers adds to every answer: the
// request's Origin (else *) allowed, with credentials; a preflight (OPTIONS) also gets
// the methods, max age and the headers asked for. Istio's pages print them
// (access-control-allow-origin: *, access-control-allow-credentials: true).
func httpbinCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", cmp.Or(r.Header.Get("Origin"), "*"))
		h.Set("Access-Control-Allow-Credentials", "true")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, PATCH, OPTIONS")
			h.Set("Access-Control-Max-Age", "3600")
			if v := r.Header.Get("Access-Control-Request-Headers"); v != "" {
				h.Set("Access-Control-Allow-Headers", v)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// httpbin holds the persona's state: the random source of /status/{codes}.
type httpbin struct {
	rnd *rand.Rand
}

// serveStatus answers /status/{codes}: one code, or a random one of a comma-separated
// list, each optionally weighted as "code:weight" (httpbin's syntax).
func (b *httpbin) serveStatus(w http.ResponseWriter, r *http.Request) {
	code, err := b.pickStatus(r.PathValue("codes"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Flask's answer of an empty (or the teapot's) body: text/html, its length.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if code != http.StatusTeapot {
		w.Header().Set("Content-Length", "0")
	}
	switch code {
	case http.StatusTeapot:
		w.Header().Set("X-More-Info", "http://tools.ietf.org/html/rfc2324")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, teapot)
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusNotModified,
		http.StatusUseProxy, http.StatusTemporaryRedirect:
		w.Header().Set("Location", "/redirect/1")
		w.WriteHeader(code)
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Basic realm="Fake Realm"`)
		w.WriteHeader(code)
	default:
		w.WriteHeader(code)
	}
}

// pickStatus parses /status/{codes} and draws one.
func (b *httpbin) pickStatus(spec string) (int, error) {
	type choice struct {
		code   int
		weight float64
	}
	var choices []choice
	total := 0.0
	for part := range strings.SplitSeq(spec, ",") {
		codeText, weightText, weighted := strings.Cut(part, ":")
		code, err := strconv.Atoi(codeText)
		if err != nil || code < 100 || code > 599 {
			return 0, fmt.Errorf("invalid status code %q", codeText)
		}
		weight := 1.0
		if weighted {
			weight, err = strconv.ParseFloat(weightText, 64)
			if err != nil || weight < 0 {
				return 0, fmt.Errorf("invalid weight %q of status code %d", weightText, code)
			}
		}
		choices = append(choices, choice{code, weight})
		total += weight
	}
	if len(choices) == 1 {
		return choices[0].code, nil
	}
	if total <= 0 {
		return 0, fmt.Errorf("status codes %q have no positive weight", spec)
	}
	x := b.rnd.Float64() * total
	for _, c := range choices {
		if x < c.weight {
			return c.code, nil
		}
		x -= c.weight
	}
	return choices[len(choices)-1].code, nil
}

// serveDelay answers /delay/{n} as /get, after n seconds (at most 10; fractions allowed).
func serveDelay(w http.ResponseWriter, r *http.Request) {
	secs, err := strconv.ParseFloat(r.PathValue("n"), 64)
	if err != nil || secs < 0 {
		http.Error(w, fmt.Sprintf("invalid delay %q", r.PathValue("n")), http.StatusBadRequest)
		return
	}
	d := min(time.Duration(secs*float64(time.Second)), httpbinMaxDelay)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusOK, echo(r))
}

// serveAnything echoes the request: method, args, headers, origin, url, and its body as
// data (and json when it parses).
func serveAnything(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, httpbinMaxBody+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > httpbinMaxBody {
		http.Error(w, fmt.Sprintf("body over %d bytes", httpbinMaxBody), http.StatusRequestEntityTooLarge)
		return
	}
	out := echo(r)
	out["method"] = r.Method
	out["data"] = string(body)
	var parsed any
	if json.Unmarshal(body, &parsed) == nil {
		out["json"] = parsed
	} else {
		out["json"] = nil
	}
	writeJSON(w, http.StatusOK, out)
}

// serveResponseHeaders sets every query parameter as a response header and echoes them.
func serveResponseHeaders(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{}
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
		out[k] = strings.Join(vs, ",")
	}
	writeJSON(w, http.StatusOK, out)
}

func serveHTTPBinIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>httpbin</title></head><body>"+
		"<h1>httpbin</h1><p>A simple HTTP request and response service (meshlab's built-in httpbin).</p>"+
		"<ul><li>/get</li><li>/headers</li><li>/ip</li><li>/user-agent</li><li>/status/{codes}</li>"+
		"<li>/delay/{n}</li><li>/anything</li><li>/uuid</li><li>/bytes/{n}</li><li>/response-headers</li></ul>"+
		"</body></html>\n")
}

// echo is /get's answer: args, headers, origin and url.
func echo(r *http.Request) map[string]any {
	args := map[string]any{}
	for k, vs := range r.URL.Query() {
		if len(vs) == 1 {
			args[k] = vs[0]
		} else {
			args[k] = vs
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return map[string]any{
		"args":    args,
		"headers": headerMap(r),
		"origin":  origin(r),
		"url":     scheme + "://" + r.Host + r.URL.RequestURI(),
	}
}

// headerMap is the request's headers as httpbin shows them: canonical names, the values
// of a repeated header joined with commas, and Host.
func headerMap(r *http.Request) map[string]string {
	h := make(map[string]string, len(r.Header)+1)
	for k, vs := range r.Header {
		h[http.CanonicalHeaderKey(k)] = strings.Join(vs, ",")
	}
	h["Host"] = r.Host
	return h
}

// origin is the client's address, preceded by the X-Forwarded-For chain if any, as
// httpbin reports it.
func origin(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		parts := strings.Split(xff, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return strings.Join(parts, ", ")
	}
	return host
}

func newUUID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// writeJSON writes v indented, as httpbin does, with sorted keys (encoding/json sorts map
// keys) and a trailing newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
