package web

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// guardedRecorder serves a guard in front of a handler that answers 200.
func guardedRecorder(g Guard) http.Handler {
	return g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
}

// login opens the login URL, with the cookie of a previous session if given, and returns
// the new session cookie.
func login(t *testing.T, h http.Handler, g Guard, prev *http.Cookie) *http.Cookie {
	t.Helper()
	req := httptest.NewRequest("GET", g.LoginURL(), nil)
	req.Host = g.Addr
	if prev != nil {
		req.AddCookie(prev)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("login: %d, cookies %v", rec.Code, cookies)
	}
	return cookies[0]
}

// get requests / with cookie and returns the status.
func get(h http.Handler, g Guard, c *http.Cookie) int {
	req := httptest.NewRequest("GET", "http://"+g.Addr+"/", nil)
	req.Host = g.Addr
	if c != nil {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestSessionsRotateAndExpire(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	g := Guard{Token: "login-token", Addr: "127.0.0.1:15080", SessionTTL: time.Hour, Now: clock}
	h := guardedRecorder(g)

	first := login(t, h, g, nil)
	if got := get(h, g, first); got != http.StatusOK {
		t.Fatalf("first session: %d, want 200", got)
	}
	// Logging in again rotates: a new id, the previous one ends.
	second := login(t, h, g, first)
	if second.Value == first.Value {
		t.Fatal("a second login kept the session id")
	}
	if got := get(h, g, first); got != http.StatusUnauthorized {
		t.Errorf("session before the second login: %d, want 401", got)
	}
	// A cookie holding the login token itself (the old scheme) is no session.
	if got := get(h, g, &http.Cookie{Name: g.CookieName(), Value: g.Token}); got != http.StatusUnauthorized {
		t.Errorf("cookie holding the token: %d, want 401", got)
	}
	advance(59 * time.Minute)
	if got := get(h, g, second); got != http.StatusOK {
		t.Errorf("session before its expiry: %d, want 200", got)
	}
	advance(time.Minute)
	if got := get(h, g, second); got != http.StatusUnauthorized {
		t.Errorf("session after its TTL: %d, want 401", got)
	}
}

// TestSessionsPerPort: two labs' dashboards on 127.0.0.1 name their cookies after their
// ports, so a browser keeps one session for each, and neither accepts the other's.
func TestSessionsPerPort(t *testing.T) {
	a := Guard{Token: "token-a", Addr: "127.0.0.1:15080"}
	b := Guard{Token: "token-b", Addr: "127.0.0.1:15081"}
	if a.CookieName() == b.CookieName() {
		t.Fatalf("both dashboards use cookie %s", a.CookieName())
	}
	ha, hb := guardedRecorder(a), guardedRecorder(b)
	ca := login(t, ha, a, nil)
	cb := login(t, hb, b, nil)
	if get(ha, a, ca) != http.StatusOK || get(hb, b, cb) != http.StatusOK {
		t.Fatal("a session does not work on its own dashboard")
	}
	if got := get(hb, b, &http.Cookie{Name: b.CookieName(), Value: ca.Value}); got != http.StatusUnauthorized {
		t.Errorf("lab a's session id on lab b: %d, want 401", got)
	}
}

func TestSessionsBounded(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newSessions(time.Hour, func() time.Time { tick = tick.Add(time.Second); return tick })
	first, err := s.start("")
	if err != nil {
		t.Fatal(err)
	}
	for range maxSessions {
		if _, err := s.start(""); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.byID) != maxSessions {
		t.Errorf("%d sessions kept, want at most %d", len(s.byID), maxSessions)
	}
	if s.valid(first) {
		t.Error("the oldest session survived logins beyond the bound")
	}
}
