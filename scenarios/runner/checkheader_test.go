package runner

import (
	"net/http"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
)

func TestHeaderCheck(t *testing.T) {
	var tr api.TrafficResult
	tr.Sent = 10
	tr.Statuses = map[string]int{"200": 10}
	for i := range 10 {
		h := http.Header{"Content-Type": {"application/json"}}
		if i < 6 {
			h.Set("x-route", "jason")
		}
		if i < 2 {
			h.Set("x-other", "a")
		} else if i < 4 {
			h.Set("x-other", "b")
		}
		tr.AddResponseHeaders(h)
	}
	one, four, seven := 1, 4, 7
	half, most := Percent(50), Percent(70)
	tests := []struct {
		name string
		c    HeaderCheck
		pass bool
	}{
		{"present everywhere", HeaderCheck{Name: "content-type"}, true},
		{"value everywhere", HeaderCheck{Name: "Content-Type", Value: "application/json"}, true},
		{"not everywhere", HeaderCheck{Name: "x-route"}, false},
		{"min", HeaderCheck{Name: "x-route", Value: "jason", Min: &four}, true},
		{"min too high", HeaderCheck{Name: "x-route", Min: &seven}, false},
		{"fraction", HeaderCheck{Name: "x-route", Fraction: &half}, true},
		{"fraction too high", HeaderCheck{Name: "x-route", Fraction: &most}, false},
		{"max", HeaderCheck{Name: "x-route", Max: &one}, false},
		{"wrong value", HeaderCheck{Name: "x-route", Value: "alice", Min: &one}, false},
		{"absent", HeaderCheck{Name: "x-missing", Absent: true}, true},
		{"absent but there", HeaderCheck{Name: "x-route", Absent: true}, false},
		{"absent value", HeaderCheck{Name: "x-route", Value: "alice", Absent: true}, true},
		{"ambiguous value min", HeaderCheck{Name: "x-other", Value: "a", Min: &one}, false},
		{"ambiguous value max", HeaderCheck{Name: "x-other", Value: "a", Max: &four}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var res Result
			header(tc.c, &stepState{traffic: &tr}, &res)
			if res.Passed != tc.pass {
				t.Fatalf("passed %v, want %v (saw %q, want %q)", res.Passed, tc.pass, res.Saw, res.Want)
			}
			if res.Saw == "" || res.Want == "" {
				t.Fatalf("empty result %+v", res)
			}
		})
	}
	var res Result
	header(HeaderCheck{Name: "x"}, &stepState{}, &res)
	if res.Passed || !strings.Contains(res.Saw, "no traffic") {
		t.Fatalf("without traffic: %+v", res)
	}
}
