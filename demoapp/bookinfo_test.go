package demoapp

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// bookinfoLab runs productpage, details, the three reviews versions and ratings on
// loopback test servers; reviews is the version named, and ratings waits ratingsDelay
// before answering (a fault injected on ratings). It records the end-user header ratings
// received.
type bookinfoLab struct {
	productpage *httptest.Server
	mu          sync.Mutex
	ratingsUser []string
}

// newBookinfoLab starts the services with the sample's timeouts scaled to unit per second
// (0: the sample's own).
func newBookinfoLab(t *testing.T, reviewsVersion string, ratingsDelay, unit time.Duration) *bookinfoLab {
	t.Helper()
	lab := &bookinfoLab{}
	to := sampleTimeouts
	if unit > 0 {
		scale := func(d time.Duration) time.Duration { return d * unit / time.Second }
		to = bookinfoTimeouts{scale(to.page), to.attempts, scale(to.blackStars), scale(to.redStars)}
	}
	servers := map[string]*httptest.Server{}
	up := func(service string) string { return servers[service].URL }
	client := &http.Client{}
	start := func(name string, h http.Handler) {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		servers[name] = srv
	}
	ratings := newBookinfo(PersonaRatings, "ratings-v1-x", client, up, to)
	start("ratings", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lab.mu.Lock()
		lab.ratingsUser = append(lab.ratingsUser, r.Header.Get("end-user"))
		lab.mu.Unlock()
		select {
		case <-time.After(ratingsDelay):
		case <-r.Context().Done():
			return
		}
		ratings.ServeHTTP(w, r)
	}))
	start("details", newBookinfo(PersonaDetails, "details-v1-x", client, up, to))
	reviews := newBookinfo("bookinfo-reviews-"+reviewsVersion, "reviews-"+reviewsVersion+"-x", client, up, to)
	start("reviews", reviews)
	pp := newBookinfo(PersonaProductPage, "productpage-v1-x", client, up, to)
	start("productpage", pp)
	lab.productpage = servers["productpage"]
	return lab
}

func (l *bookinfoLab) page(t *testing.T, client *http.Client) string {
	t.Helper()
	resp, err := client.Get(l.productpage.URL + "/productpage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /productpage: %d\n%s", resp.StatusCode, body)
	}
	return string(body)
}

func TestBookinfoStarsPerReviewsVersion(t *testing.T) {
	t.Parallel()
	for version, want := range map[string]string{
		"v1": "",
		"v2": `<font color="black">`,
		"v3": `<font color="red">`,
	} {
		lab := newBookinfoLab(t, version, 0, 0)
		page := lab.page(t, http.DefaultClient)
		if !strings.Contains(page, "<title>Simple Bookstore App</title>") || !strings.Contains(page, "Book Details") || strings.Contains(page, "unavailable") {
			t.Errorf("reviews %s: the page is not a whole product page:\n%s", version, page)
		}
		stars := strings.Count(page, "glyphicon-star\"")
		switch {
		case want == "" && (stars != 0 || strings.Contains(page, "<font")):
			t.Errorf("reviews v1 shows stars:\n%s", page)
		case want != "" && (!strings.Contains(page, want) || stars != 9):
			t.Errorf("reviews %s: want %s and 5+4 full stars, got %d:\n%s", version, want, stars, page)
		}
	}
}

func TestBookinfoLoginPropagatesEndUser(t *testing.T) {
	t.Parallel()
	lab := newBookinfoLab(t, "v2", 0, 0)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.PostForm(lab.productpage.URL+"/login", url.Values{"username": {"jason"}, "passwd": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Welcome, <b>jason</b>") {
		t.Errorf("after login the page does not greet jason:\n%s", body)
	}
	lab.mu.Lock()
	defer lab.mu.Unlock()
	if len(lab.ratingsUser) == 0 || lab.ratingsUser[len(lab.ratingsUser)-1] != "jason" {
		t.Errorf("ratings saw end-user %q; want jason, propagated by productpage and reviews", lab.ratingsUser)
	}
}

// TestBookinfoFaultInjectionBug is the fault-injection task's lesson: a 7 s delay on
// ratings is within reviews v2's 10 s, but productpage gives reviews 3 s twice, so the page
// says reviews are unavailable (in 6 s, not 7). Timeouts run at 1/5 of the sample's: at
// 1/100 a loaded CI machine let productpage's 30 ms timeout fire before reviews had called
// ratings at all.
func TestBookinfoFaultInjectionBug(t *testing.T) {
	t.Parallel()
	const unit = 200 * time.Millisecond // the sample's 1 s
	lab := newBookinfoLab(t, "v2", 7*unit, unit)
	start := time.Now()
	page := lab.page(t, http.DefaultClient)
	took := time.Since(start)
	if !strings.Contains(page, reviewsUnavailable) || !strings.Contains(page, "Error fetching product reviews!") || strings.Contains(page, "Book Reviews") {
		t.Errorf("with a 7 s ratings delay and reviews v2 the page shows reviews (want the sample's \"Error fetching product reviews!\" heading in place of \"Book Reviews\"):\n%s", page)
	}
	if took < 6*unit || took > 10*unit+time.Second {
		t.Errorf("the page took %v; want about productpage's 2 x 3 s (%v)", took, 6*unit)
	}
	lab.mu.Lock()
	calls := len(lab.ratingsUser)
	lab.mu.Unlock()
	if calls != 2 {
		t.Errorf("ratings was called %d times; want 2 (productpage retries reviews once)", calls)
	}

	// reviews v3 waits only 2.5 s for ratings: the page shows the reviews, without stars.
	// Here the page depends on reviews answering within productpage's 3 s after giving up
	// on ratings at 2.5 s: a slack of half a unit, so the unit is large enough to keep
	// that slack (100 ms) well above scheduling delays on a loaded machine under -race.
	const slowUnit = 200 * time.Millisecond
	lab = newBookinfoLab(t, "v3", 7*slowUnit, slowUnit)
	page = lab.page(t, http.DefaultClient)
	if !strings.Contains(page, ratingsUnavailable) || strings.Contains(page, reviewsUnavailable) {
		t.Errorf("reviews v3 with a slow ratings: want reviews with %q:\n%s", ratingsUnavailable, page)
	}
}

func TestBookinfoTimeoutsAreTheSamples(t *testing.T) {
	t.Parallel()
	if productPageTimeout != 3*time.Second || productPageAttempts != 2 || reviewsBlackStarsWait != 10*time.Second || reviewsRedStarsWait != 2500*time.Millisecond {
		t.Error("Bookinfo's timeouts changed; Istio's fault-injection and request-timeouts tasks depend on them")
	}
}

// TestBookinfoProductPageConnectionPerCall: productpage opens a new connection to reviews
// for every page, as the sample's does (requests.get, no pool): in ambient mode a
// connection kept from before a waypoint existed would keep going around it.
func TestBookinfoProductPageConnectionPerCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns := map[string]int{}
	servers := map[string]*httptest.Server{}
	up := func(service string) string { return servers[service].URL }
	for _, name := range []string{"details", "reviews"} {
		persona := map[string]string{"details": PersonaDetails, "reviews": PersonaReviewsV1}[name]
		srv := httptest.NewUnstartedServer(newBookinfo(persona, name+"-x", &http.Client{}, up, sampleTimeouts))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				mu.Lock()
				conns[name]++
				mu.Unlock()
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		servers[name] = srv
	}
	pp := httptest.NewServer(newBookinfo(PersonaProductPage, "productpage-x", &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, up, sampleTimeouts))
	t.Cleanup(pp.Close)
	lab := &bookinfoLab{productpage: pp}
	for range 3 {
		if page := lab.page(t, http.DefaultClient); strings.Contains(page, "unavailable") {
			t.Fatalf("a call failed:\n%s", page)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns["details"] != 3 || conns["reviews"] != 3 {
		t.Errorf("3 pages opened %v connections; want 3 to each of details and reviews", conns)
	}
}
