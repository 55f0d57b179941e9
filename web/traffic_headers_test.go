package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
)

func TestAddResponseHeadersBounds(t *testing.T) {
	var r api.TrafficResult
	for i := range 20 {
		h := http.Header{}
		h.Set("x-route", fmt.Sprint("v", i))
		h.Set("server", "envoy")
		r.AddResponseHeaders(h)
	}
	if got := r.Headers["X-Route"]; got.Count != 20 || len(got.Values) != api.MaxHeaderValues || got.Values[0] != "v0" {
		t.Fatalf("x-route %+v", got)
	}
	if got := r.Headers["Server"]; got.Count != 20 || len(got.Values) != 1 {
		t.Fatalf("server %+v", got)
	}
	h := http.Header{}
	for i := range 2 * api.MaxResponseHeaders {
		h.Set(fmt.Sprint("x-h", i), "1")
	}
	r.AddResponseHeaders(h)
	if len(r.Headers) != api.MaxResponseHeaders {
		t.Fatalf("%d names, want %d", len(r.Headers), api.MaxResponseHeaders)
	}
}

func TestTrafficRequestValidateHeaders(t *testing.T) {
	ok := api.TrafficRequest{Pod: "p", URL: "http://b:8080/", N: 1, Method: "POST", Headers: map[string]string{"end-user": "jason"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid request: %v", err)
	}
	for _, tc := range []struct {
		name string
		r    api.TrafficRequest
		want string
	}{
		{"method", api.TrafficRequest{Method: "BREW"}, "method:"},
		{"name", api.TrafficRequest{Headers: map[string]string{"a b": "x"}}, "invalid name"},
		{"value", api.TrafficRequest{Headers: map[string]string{"a": "x\r\ny: z"}}, "invalid value"},
		{"host", api.TrafficRequest{Headers: map[string]string{"Host": "x"}}, "cannot be set"},
	} {
		r := ok
		r.Method, r.Headers = tc.r.Method, tc.r.Headers
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	many := map[string]string{}
	for i := range api.MaxTrafficHeaders + 1 {
		many[fmt.Sprint("h", i)] = "v"
	}
	r := ok
	r.Headers = many
	if err := r.Validate(); err == nil {
		t.Fatal("too many headers accepted")
	}
}
