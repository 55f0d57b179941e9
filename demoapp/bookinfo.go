package demoapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The bookinfo personas behave as the four services of Istio's Bookinfo sample do where
// Istio's tasks observe them: who calls whom (productpage -> details and reviews;
// reviews v2 and v3 -> ratings), the end-user header set by productpage's login and
// propagated with the trace headers, the stars each reviews version shows (none, black,
// red), and the timeouts and retries the sample's code has: productpage gives details and
// reviews 3 s each and tries reviews twice; reviews v2 waits 10 s for ratings, v3 2.5 s.
// Those timeouts are what the fault-injection task's "bug" comes from: a 7 s delay on
// ratings makes reviews v2 wait past productpage's 2 x 3 s. The texts are meshlab's own.

// Bookinfo personas, as the sample's images name them.
const (
	PersonaProductPage = "bookinfo-productpage"
	PersonaDetails     = "bookinfo-details"
	PersonaReviewsV1   = "bookinfo-reviews-v1"
	PersonaReviewsV2   = "bookinfo-reviews-v2"
	PersonaReviewsV3   = "bookinfo-reviews-v3"
	PersonaRatings     = "bookinfo-ratings"
)

// The sample's service addresses and client timeouts.
const (
	bookinfoPort          = "9080"
	productPageTimeout    = 3 * time.Second // details and each reviews attempt
	productPageAttempts   = 2               // reviews is tried twice
	reviewsBlackStarsWait = 10 * time.Second
	reviewsRedStarsWait   = 2500 * time.Millisecond
)

// Messages productpage shows when a service fails, as the sample shows them to the user.
const (
	detailsUnavailable = "Sorry, product details are currently unavailable for this book."
	reviewsUnavailable = "Sorry, product reviews are currently unavailable for this book."
	ratingsUnavailable = "Ratings service is currently unavailable"
)

// bookinfoHeaders are the headers the Bookinfo services copy from the request they serve
// to the requests they make: the end user and the trace headers.
var bookinfoHeaders = append([]string{"end-user", "user-agent", "cookie"}, propagatedHeaders...)

// bookinfoUpstream says where a persona finds the others: "http://<service>:9080" by
// default, overridable for tests.
type bookinfoUpstream func(service string) string

func defaultBookinfoUpstream(service string) string { return "http://" + service + ":" + bookinfoPort }

// bookinfoTimeouts are the Bookinfo services' client timeouts.
type bookinfoTimeouts struct {
	page       time.Duration // productpage's, for details and each reviews attempt
	attempts   int           // productpage's attempts at reviews
	blackStars time.Duration // reviews v2's wait for ratings
	redStars   time.Duration // reviews v3's
}

// sampleTimeouts are the timeouts the sample's code has.
var sampleTimeouts = bookinfoTimeouts{productPageTimeout, productPageAttempts, reviewsBlackStarsWait, reviewsRedStarsWait}

// newBookinfo returns the handler of one Bookinfo persona in pod, or nil when persona is
// not one. client's own timeout must be unset: each call has its timeout from to.
func newBookinfo(persona, pod string, client *http.Client, up bookinfoUpstream, to bookinfoTimeouts) *http.ServeMux {
	if up == nil {
		up = defaultBookinfoUpstream
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": persona + " is healthy"})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	switch persona {
	case PersonaProductPage:
		p := &productPage{client: unpooled(client), up: up, timeout: to.page, attempts: to.attempts}
		mux.HandleFunc("GET /{$}", p.serveIndex)
		mux.HandleFunc("GET /productpage", p.serveProductPage)
		mux.HandleFunc("POST /login", p.serveLogin)
		mux.HandleFunc("GET /logout", p.serveLogout)
		mux.HandleFunc("GET /api/v1/products", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, []map[string]any{{"id": 0, "title": bookTitle, "descriptionHtml": bookBlurb}})
		})
		mux.HandleFunc("GET /api/v1/products/{id}/reviews", p.serveAPIReviews)
	case PersonaDetails:
		mux.HandleFunc("GET /details/{id}", serveDetails)
	case PersonaReviewsV1, PersonaReviewsV2, PersonaReviewsV3:
		r := &reviews{client: client, up: up, pod: pod, version: strings.TrimPrefix(persona, "bookinfo-reviews-")}
		r.wait = to.blackStars
		if r.version == "v3" {
			r.wait = to.redStars
		}
		mux.HandleFunc("GET /reviews/{id}", r.serve)
	case PersonaRatings:
		mux.HandleFunc("GET /ratings/{id}", serveRatings)
	default:
		return nil
	}
	return mux
}

// unpooled returns client with a transport that opens a new connection for every request,
// as the sample's productpage does (it calls details and reviews with requests.get, a new
// session each time, to spread its calls across the backends' versions). A pooled client
// would keep a connection made before a waypoint existed, which ztunnel then keeps sending
// around the waypoint.
func unpooled(client *http.Client) *http.Client {
	t, ok := client.Transport.(*http.Transport)
	if client.Transport == nil {
		t, ok = http.DefaultTransport.(*http.Transport), true
	}
	if !ok {
		return client
	}
	t = t.Clone()
	t.DisableKeepAlives = true
	c := *client
	c.Transport = t
	return &c
}

// The book every Bookinfo page is about.
const (
	bookTitle  = "The Comedy of Errors"
	bookBlurb  = "A comedy of mistaken identities: two pairs of twins, one town, one very long day."
	bookAuthor = "William Shakespeare"
)

// bookReviews are the two reviews reviews answers with (meshlab's own words).
var bookReviews = []struct{ reviewer, text string }{
	{"Reviewer1", "Fast, loud and very funny; the confusion never lets up."},
	{"Reviewer2", "Great fun on stage, though lighter than the later plays."},
}

// bookRatings are the stars ratings gives each reviewer.
var bookRatings = map[string]int{"Reviewer1": 5, "Reviewer2": 4}

func bookID(r *http.Request) (int, bool) {
	id, err := strconv.Atoi(r.PathValue("id"))
	return id, err == nil && id >= 0
}

func serveDetails(w http.ResponseWriter, r *http.Request) {
	id, ok := bookID(r)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "please provide numeric product id"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "author": bookAuthor, "year": 1595, "type": "paperback", "pages": 200,
		"publisher": "PublisherA", "language": "English",
		"ISBN-10": "1234567890", "ISBN-13": "123-1234567890",
	})
}

func serveRatings(w http.ResponseWriter, r *http.Request) {
	id, ok := bookID(r)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "please provide numeric product ID"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "ratings": bookRatings})
}

// reviews is one version of the reviews service: v1 shows no stars, v2 black ones, v3 red
// ones, each waiting for ratings as long as the sample's version does.
type reviews struct {
	client  *http.Client
	up      bookinfoUpstream
	pod     string
	version string
	wait    time.Duration // how long ratings may take
}

// reviewRating is a review's stars, or why there are none.
type reviewRating struct {
	Stars int    `json:"stars,omitempty"`
	Color string `json:"color,omitempty"`
	Error string `json:"error,omitempty"`
}

type review struct {
	Reviewer string        `json:"reviewer"`
	Text     string        `json:"text"`
	Rating   *reviewRating `json:"rating,omitempty"`
}

func (rv *reviews) serve(w http.ResponseWriter, r *http.Request) {
	id, ok := bookID(r)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "please provide numeric product ID"})
		return
	}
	out := make([]review, len(bookReviews))
	for i, b := range bookReviews {
		out[i] = review{Reviewer: b.reviewer, Text: b.text}
	}
	if rv.version != "v1" {
		color := "black"
		if rv.version == "v3" {
			color = "red"
		}
		var ratings struct {
			Ratings map[string]int `json:"ratings"`
		}
		err := getJSON(r, rv.client, rv.wait, rv.up("ratings")+"/ratings/"+strconv.Itoa(id), &ratings)
		for i := range out {
			if err != nil {
				out[i].Rating = &reviewRating{Error: ratingsUnavailable}
				continue
			}
			out[i].Rating = &reviewRating{Stars: ratings.Ratings[out[i].Reviewer], Color: color}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": strconv.Itoa(id), "podname": rv.pod, "clustername": "null", "reviews": out})
}

// productPage is the front page: it calls details and reviews for every page it renders.
type productPage struct {
	client   *http.Client
	up       bookinfoUpstream
	timeout  time.Duration // of the details call and of each reviews attempt
	attempts int           // of the reviews call
}

// userCookie holds the logged-in user's name (the sample keeps it in its session).
const userCookie = "session"

func (p *productPage) serveIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>Simple Bookstore App</title></head><body>"+
		"<h3>Bookinfo</h3><p>A book page made of four services. Open <a href=\"/productpage?u=normal\">the product page</a>.</p>"+
		"</body></html>\n")
}

func (p *productPage) serveLogin(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	user := r.PostForm.Get("username")
	http.SetCookie(w, &http.Cookie{Name: userCookie, Value: url.QueryEscape(user), Path: "/", HttpOnly: true})
	http.Redirect(w, r, "/productpage", http.StatusFound)
}

func (p *productPage) serveLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: userCookie, Value: "", Path: "/", MaxAge: -1})
	http.Redirect(w, r, "/productpage", http.StatusFound)
}

// endUser is the logged-in user: the session cookie, else an end-user header the caller
// set (as a task's curl does).
func endUser(r *http.Request) string {
	if c, err := r.Cookie(userCookie); err == nil && c.Value != "" {
		if u, err := url.QueryUnescape(c.Value); err == nil {
			return u
		}
	}
	return r.Header.Get("end-user")
}

// fetchReviews calls reviews as the sample does: two attempts of 3 s each; the status and
// reviews of the last attempt, or the error message to show.
func (p *productPage) fetchReviews(r *http.Request) (int, []review, string) {
	var body struct {
		Reviews []review `json:"reviews"`
	}
	status := http.StatusInternalServerError
	for range p.attempts {
		err := getJSON(r, p.client, p.timeout, p.up("reviews")+"/reviews/0", &body)
		if err == nil {
			return http.StatusOK, body.Reviews, ""
		}
		var se *statusError
		if errors.As(err, &se) {
			status = se.status
		}
	}
	return status, nil, reviewsUnavailable
}

func (p *productPage) serveAPIReviews(w http.ResponseWriter, r *http.Request) {
	status, rs, msg := p.fetchReviews(r)
	if msg != "" {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": 0, "reviews": rs})
}

func (p *productPage) serveProductPage(w http.ResponseWriter, r *http.Request) {
	user := endUser(r)
	if user != "" {
		r.Header.Set("end-user", user)
	}
	var details map[string]any
	detailsErr := getJSON(r, p.client, p.timeout, p.up("details")+"/details/0", &details)
	_, rs, reviewsMsg := p.fetchReviews(r)

	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><title>Simple Bookstore App</title></head><body>\n")
	if user != "" {
		fmt.Fprintf(&b, "<p class=\"user\">Welcome, <b>%s</b> <a href=\"/logout\">sign out</a></p>\n", html.EscapeString(user))
	} else {
		b.WriteString("<form method=\"post\" action=\"/login\"><input name=\"username\"><input name=\"passwd\" type=\"password\"><button>Sign in</button></form>\n")
	}
	fmt.Fprintf(&b, "<h3>%s</h3>\n<p>%s</p>\n", bookTitle, bookBlurb)
	// The sample's template: a failed call replaces the section's heading with
	// "Error fetching product details!" (or reviews) above the error text.
	if detailsErr != nil {
		fmt.Fprintf(&b, "<h4>Error fetching product details!</h4>\n<p class=\"error\">%s</p>\n", detailsUnavailable)
	} else {
		b.WriteString("<h4>Book Details</h4>\n")
		for _, k := range []string{"type", "pages", "publisher", "language", "ISBN-10", "ISBN-13"} {
			fmt.Fprintf(&b, "<dt>%s</dt><dd>%v</dd>\n", k, details[k])
		}
	}
	if reviewsMsg != "" {
		fmt.Fprintf(&b, "<h4>Error fetching product reviews!</h4>\n<p class=\"error\">%s</p>\n", reviewsUnavailable)
	} else {
		b.WriteString("<h4>Book Reviews</h4>\n")
	}
	for _, rv := range rs {
		fmt.Fprintf(&b, "<blockquote><p>%s</p><small>%s</small>\n", html.EscapeString(rv.Text), html.EscapeString(rv.Reviewer))
		switch {
		case rv.Rating == nil:
		case rv.Rating.Error != "":
			fmt.Fprintf(&b, "<p class=\"error\">%s</p>\n", html.EscapeString(rv.Rating.Error))
		default:
			fmt.Fprintf(&b, "<font color=\"%s\">", rv.Rating.Color)
			for i := range 5 {
				if i < rv.Rating.Stars {
					b.WriteString("<span class=\"glyphicon glyphicon-star\"></span>")
				} else {
					b.WriteString("<span class=\"glyphicon glyphicon-star-empty\"></span>")
				}
			}
			b.WriteString("</font>\n")
		}
		b.WriteString("</blockquote>\n")
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, b.String())
}

// statusError is an upstream's non-200 answer.
type statusError struct{ status int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.status) }

// getJSON GETs url within timeout, with the Bookinfo headers of in, and decodes a 200
// answer into out.
func getJSON(in *http.Request, client *http.Client, timeout time.Duration, target string, out any) error {
	ctx, cancel := context.WithTimeout(in.Context(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	for _, k := range bookinfoHeaders {
		if v := in.Header.Values(k); len(v) > 0 {
			req.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxUpstreamBody))
		return &statusError{resp.StatusCode}
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxUpstreamBody)).Decode(out)
}
