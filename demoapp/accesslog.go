package demoapp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// accessLog wraps next with an access log written to w, one line per request in the
// format of httpbin run by gunicorn with --access-logfile - (Istio's mirroring task reads
// it with `kubectl logs` to see which version got a request):
//
//	127.0.0.6 - - [07/Mar/2018:19:02:43 +0000] "GET /headers HTTP/1.1" 200 321 "-" "curl/7.35.0"
func accessLog(w io.Writer, next http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: rw, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		referer := r.Referer()
		if referer == "" {
			referer = "-"
		}
		ua := r.UserAgent()
		if ua == "" {
			ua = "-"
		}
		line := fmt.Sprintf("%s - - [%s] \"%s %s %s\" %d %s %q %q\n", host, time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"),
			r.Method, r.URL.RequestURI(), r.Proto, rec.status, strconv.FormatInt(rec.bytes, 10), referer, ua)
		mu.Lock()
		_, _ = io.WriteString(w, line)
		mu.Unlock()
	})
}

// statusRecorder remembers the status and body size a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Flush passes a flush on (httpbin's streaming endpoints).
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
