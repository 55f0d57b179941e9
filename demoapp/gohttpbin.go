package demoapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The go-httpbin persona answers as mccutchen/go-httpbin, the image Istio's samples/httpbin
// runs today, on the endpoints the tasks use. Its answers differ from httpbin's (httpbin.go,
// which httpbin.org and the older samples' kennethreitz/httpbin keep): header and query
// values are lists (`"Accept": ["*/*"]`), JSON is sent as application/json; charset=utf-8,
// /status/418 is the text "I'm a teapot!", /delay/{duration} takes Go durations or seconds
// up to 10 s and refuses longer ones with a JSON error, and errors are JSON objects
// {status_code, error, detail}.

// goHTTPBinMaxDuration is go-httpbin's default longest /delay.
const goHTTPBinMaxDuration = 10 * time.Second

// goHTTPBinJSON and goHTTPBinText are go-httpbin's content types.
const (
	goHTTPBinJSON = "application/json; charset=utf-8"
	goHTTPBinText = "text/plain; charset=utf-8"
)

// goHTTPBinStatus are the codes go-httpbin answers with headers or a body of their own.
var goHTTPBinStatus = map[int]struct {
	headers map[string]string
	body    string
}{
	301: {headers: map[string]string{"Location": "/redirect/1"}},
	302: {headers: map[string]string{"Location": "/redirect/1"}},
	303: {headers: map[string]string{"Location": "/redirect/1"}},
	305: {headers: map[string]string{"Location": "/redirect/1"}},
	307: {headers: map[string]string{"Location": "/redirect/1"}},
	401: {headers: map[string]string{"WWW-Authenticate": `Basic realm="Fake Realm"`}},
	407: {headers: map[string]string{"Proxy-Authenticate": `Basic realm="Fake Realm"`}},
	418: {headers: map[string]string{"X-More-Info": "http://tools.ietf.org/html/rfc2324"}, body: "I'm a teapot!"},
}

// newGoHTTPBin returns the go-httpbin persona's handler; rnd picks among /status's
// codes (nil: a random source).
func newGoHTTPBin(rnd *rand.Rand) *http.ServeMux {
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	b := &httpbin{rnd: rnd}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", serveGoHTTPBinIndex)
	mux.HandleFunc("GET /get", func(w http.ResponseWriter, r *http.Request) { goJSON(w, http.StatusOK, goNoBody(r)) })
	mux.HandleFunc("HEAD /head", func(w http.ResponseWriter, r *http.Request) { goJSON(w, http.StatusOK, goNoBody(r)) })
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		goJSON(w, http.StatusOK, map[string]any{"headers": goHeaders(r)})
	})
	mux.HandleFunc("/ip", func(w http.ResponseWriter, r *http.Request) {
		ip := goClientIP(r)
		if r.URL.Query().Get("format") == "text" {
			w.Header().Set("Content-Type", goHTTPBinText)
			_, _ = io.WriteString(w, ip+"\n")
			return
		}
		goJSON(w, http.StatusOK, map[string]string{"origin": ip})
	})
	mux.HandleFunc("/user-agent", func(w http.ResponseWriter, r *http.Request) {
		goJSON(w, http.StatusOK, map[string]string{"user-agent": r.UserAgent()})
	})
	mux.HandleFunc("/uuid", func(w http.ResponseWriter, _ *http.Request) {
		goJSON(w, http.StatusOK, map[string]string{"uuid": newUUID()})
	})
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, _ *http.Request) {
		goJSON(w, http.StatusOK, map[string]string{"hostname": "go-httpbin"})
	})
	mux.HandleFunc("/status/{code}", b.serveGoStatus)
	mux.HandleFunc("/delay/{duration}", serveGoDelay)
	mux.HandleFunc("/bytes/{n}", serveBytes)
	mux.HandleFunc("/response-headers", serveResponseHeaders)
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		mux.HandleFunc(m+" /"+strings.ToLower(m), serveGoWithBody)
	}
	mux.HandleFunc("/anything", serveGoWithBody)
	mux.HandleFunc("/anything/", serveGoWithBody)
	return mux
}

// goJSON writes v as go-httpbin does: indented by two spaces, HTML not escaped.
func goJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", goHTTPBinJSON)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// goError writes go-httpbin's JSON error.
func goError(w http.ResponseWriter, status int, err error) {
	e := struct {
		StatusCode int    `json:"status_code"`
		Error      string `json:"error"`
		Detail     string `json:"detail,omitempty"`
	}{StatusCode: status, Error: http.StatusText(status)}
	if err != nil {
		e.Detail = err.Error()
	}
	goJSON(w, status, e)
}

// goHeaders is the request's headers with Host, every value a list.
func goHeaders(r *http.Request) http.Header {
	h := r.Header.Clone()
	h.Set("Host", r.Host)
	if len(r.TransferEncoding) > 0 {
		h.Set("Transfer-Encoding", strings.Join(r.TransferEncoding, ","))
	}
	return h
}

// goClientIP is the caller as go-httpbin reports it: the first X-Forwarded-For entry
// (a sidecar adds the caller's address), else the connection's peer.
func goClientIP(r *http.Request) string {
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		first, _, _ := strings.Cut(xff, ",")
		return strings.TrimSpace(first)
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// goURL is the request's URL as go-httpbin rebuilds it (X-Forwarded-Proto's scheme).
func goURL(r *http.Request) string {
	scheme := r.Header.Get("X-Forwarded-Proto")
	if scheme == "" && r.TLS != nil {
		scheme = "https"
	}
	if scheme == "" {
		scheme = "http"
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	return u.String()
}

// goNoBody is /get's answer.
func goNoBody(r *http.Request) map[string]any {
	return map[string]any{
		"args":    r.URL.Query(),
		"headers": goHeaders(r),
		"method":  r.Method,
		"origin":  goClientIP(r),
		"url":     goURL(r),
	}
}

// serveGoWithBody is /anything and the method endpoints: /get's answer with the body as
// data, and json when it is JSON.
func serveGoWithBody(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, httpbinMaxBody+1))
	if err != nil || len(body) > httpbinMaxBody {
		goError(w, http.StatusBadRequest, fmt.Errorf("error parsing request body: %w", cmpErr(err, errors.New("request body too large"))))
		return
	}
	out := goNoBody(r)
	out["data"] = string(body)
	out["files"] = url.Values{}
	out["form"] = url.Values{}
	out["json"] = nil
	if len(body) > 0 && strings.Contains(r.Header.Get("Content-Type"), "json") {
		var parsed any
		if err := json.Unmarshal(body, &parsed); err != nil {
			goError(w, http.StatusBadRequest, fmt.Errorf("error parsing request body: %w", err))
			return
		}
		out["json"] = parsed
	}
	goJSON(w, http.StatusOK, out)
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// serveGoStatus answers /status/{code}: one code or a weighted choice ("200:3,500:1"),
// text/plain unless the code has a body of its own.
func (b *httpbin) serveGoStatus(w http.ResponseWriter, r *http.Request) {
	code, err := b.pickStatus(r.PathValue("code"))
	if err != nil {
		goError(w, http.StatusBadRequest, err)
		return
	}
	w.Header().Set("Content-Type", goHTTPBinText)
	special, ok := goHTTPBinStatus[code]
	for k, v := range special.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(code)
	if ok && special.body != "" {
		_, _ = io.WriteString(w, special.body)
	}
}

// serveGoDelay answers /delay/{duration} after the duration ("3", "1.5", "500ms"; at most
// 10 s, longer is refused), with a Server-Timing header and /anything's answer.
func serveGoDelay(w http.ResponseWriter, r *http.Request) {
	d, err := goDuration(r.PathValue("duration"))
	if err == nil && d > goHTTPBinMaxDuration {
		err = fmt.Errorf("duration %s longer than %s", d, goHTTPBinMaxDuration)
	}
	if err == nil && d < 0 {
		err = fmt.Errorf("duration %s shorter than 0s", d)
	}
	if err != nil {
		goError(w, http.StatusBadRequest, fmt.Errorf("invalid duration: %w", err))
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		w.WriteHeader(499) // go-httpbin's "client closed request"
		return
	}
	w.Header().Set("Server-Timing", fmt.Sprintf(`initial_delay;dur=%0.2f;desc="initial delay"`, d.Seconds()*1e3))
	serveGoWithBody(w, r)
}

// goDuration reads a Go duration, else a number of seconds.
func goDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(n*1000) * time.Millisecond, nil
}

func serveGoHTTPBinIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>go-httpbin(1): HTTP Client Testing Service</title></head><body>"+
		"<h1>go-httpbin(1): HTTP Client Testing Service</h1><p>meshlab's built-in go-httpbin.</p>"+
		"<ul><li>/get</li><li>/headers</li><li>/ip</li><li>/user-agent</li><li>/status/{code}</li>"+
		"<li>/delay/{duration}</li><li>/anything</li><li>/uuid</li><li>/bytes/{n}</li><li>/response-headers</li></ul>"+
		"</body></html>\n")
}
