package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// SessionCookiePrefix starts the name of the cookie that carries a dashboard session id;
// the listen port follows (CookieName), because browsers send a 127.0.0.1 cookie to
// every port of 127.0.0.1: two labs' dashboards must not share, or overwrite, one.
const SessionCookiePrefix = "meshlab_session_"

// TokenParam is the query parameter of the login URL `meshlab up` prints.
const TokenParam = "token"

// Guard protects the API and dashboard served on TCP. The unix socket needs none of it:
// its 0600 mode is its authentication.
//
// In order, every request must: name the listen address in its Host header (else 403: a
// DNS-rebinding page reaches 127.0.0.1 under a host name of its own); carry the session
// token, either as "Authorization: Bearer <token>" or through a session: the login URL
// trades the token for a session cookie holding a random id, never the token, new at
// every login and ending after SessionTTL (else 401); and, unless it is a GET, HEAD or OPTIONS, come from the dashboard's own
// origin (else 403: a page elsewhere cannot make the browser post to the lab).
type Guard struct {
	Token string // required: the login token
	Addr  string // required: the listen address, host:port, as the browser names it
	// SessionTTL is how long a login lasts; optional, DefaultSessionTTL when zero.
	SessionTTL time.Duration
	// Now is the clock of session expiry; optional, time.Now (tests set it).
	Now func() time.Time
}

// CookieName returns the session cookie's name: SessionCookiePrefix and the port.
func (g Guard) CookieName() string {
	_, port, err := net.SplitHostPort(g.Addr)
	if err != nil {
		port = "0"
	}
	return SessionCookiePrefix + port
}

// Origin returns the dashboard's own origin, e.g. "http://127.0.0.1:15080".
func (g Guard) Origin() string { return "http://" + g.Addr }

// LoginURL returns the URL that logs a browser in (the token in it, once).
func (g Guard) LoginURL() string {
	return g.Origin() + "/?" + TokenParam + "=" + url.QueryEscape(g.Token)
}

// hostAllowed reports whether host (a Host header) names the listen address. For a
// loopback address, "localhost" with the same port is the same place.
func (g Guard) hostAllowed(host string) bool {
	if strings.EqualFold(host, g.Addr) {
		return true
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		return false
	}
	lh, lp, err := net.SplitHostPort(g.Addr)
	if err != nil || p != lp {
		return false
	}
	ip := net.ParseIP(lh)
	return strings.EqualFold(h, "localhost") && ip != nil && ip.IsLoopback()
}

func (g Guard) tokenOK(s string) bool {
	return s != "" && subtle.ConstantTimeCompare([]byte(s), []byte(g.Token)) == 1
}

func (g Guard) authenticated(r *http.Request, s *sessions) bool {
	if c, err := r.Cookie(g.CookieName()); err == nil && s.valid(c.Value) {
		return true
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && g.tokenOK(a) {
		return true
	}
	return false
}

// Wrap returns next behind the guard. Each call keeps its own sessions.
func (g Guard) Wrap(next http.Handler) http.Handler {
	now := g.Now
	if now == nil {
		now = time.Now
	}
	s := newSessions(g.SessionTTL, now)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			http.Error(w, "forbidden: Host "+r.Host+" is not this dashboard's address", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodGet && r.URL.Query().Has(TokenParam) {
			g.login(w, r, s)
			return
		}
		if !g.authenticated(r, s) {
			http.Error(w, "unauthorized: open the URL `meshlab up` printed (it carries the session token)", http.StatusUnauthorized)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if o := r.Header.Get("Origin"); o != g.Origin() && !g.localhostOrigin(o) {
				http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
				return
			}
		}
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// localhostOrigin reports whether o is the dashboard's origin named through localhost.
func (g Guard) localhostOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "http" && u.Path == "" && !strings.EqualFold(u.Host, g.Addr) && g.hostAllowed(u.Host)
}

// login trades the token in the URL for a new session (ending the browser's previous
// one) and redirects to the same URL without it, so the token does not stay in the
// address bar or the history, and never reaches a cookie.
func (g Guard) login(w http.ResponseWriter, r *http.Request, s *sessions) {
	if !g.tokenOK(r.URL.Query().Get(TokenParam)) {
		http.Error(w, "unauthorized: wrong token", http.StatusUnauthorized)
		return
	}
	var old string
	if c, err := r.Cookie(g.CookieName()); err == nil {
		old = c.Value
	}
	id, err := s.start(old)
	if err != nil {
		http.Error(w, "start session: "+err.Error(), http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: g.CookieName(), Value: id, Path: "/", MaxAge: int(s.ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
	q := r.URL.Query()
	q.Del(TokenParam)
	target := r.URL.Path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, target, http.StatusSeeOther)
}
