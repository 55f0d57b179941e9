package demoapp

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args []string) (Config, error) {
	t.Helper()
	var c Config
	fs := pflag.NewFlagSet("app", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	c.AddFlags(fs)
	err := fs.Parse(args)
	return c, err
}

func TestArgsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{},
		{Ports: []uint16{8080}},
		{Ports: []uint16{8000}, Persona: PersonaHTTPBin},
		{Ports: []uint16{9000}, Persona: PersonaTCPEcho, PersonaArgs: []string{"9000,9001", "one"}},
		{
			Service: "backend", Pod: "backend-v1", Namespace: "default", Version: "v1",
			Ports: []uint16{8080, 9090}, Address: netip.MustParseAddr("127.0.0.1"),
			Upstreams:       []string{"http://backend:8080/", "http://a,b/?x=-1"},
			UpstreamTimeout: 2 * time.Second, Latency: 150 * time.Millisecond,
			ErrorRate: 0.25, ErrorCode: 503, Seed: 42,
		},
	} {
		args := Args(c)
		got, err := parse(t, args)
		if err != nil {
			t.Fatalf("parse %q: %v", args, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("Args then flags changed the config:\nargs %q\ngot  %+v\nwant %+v", args, got, c)
		}
	}
}

func TestArgsShape(t *testing.T) {
	t.Parallel()
	got := Args(Config{Service: "backend", Ports: []uint16{8080}, Upstreams: []string{"http://x/"}})
	want := []string{"--service=backend", "--port=8080", "--upstream=http://x/"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
}

func TestFlagErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--port=0"}, {"--port=70000"}, {"--port=http"}, {"--address=nowhere"}} {
		if _, err := parse(t, args); err == nil {
			t.Errorf("parse %q succeeded, want an error", args)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	base := Config{Ports: []uint16{8080}}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // "" for valid
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "no ports", mutate: func(c *Config) { c.Ports = nil }, want: "at least one port is required"},
		{name: "error rate", mutate: func(c *Config) { c.ErrorRate = 1.5 }, want: "error rate 1.5 is not between 0 and 1"},
		{name: "error code", mutate: func(c *Config) { c.ErrorCode = 99 }, want: "error code 99 is not an HTTP status between 200 and 599"},
		{name: "negative latency", mutate: func(c *Config) { c.Latency = -time.Second }, want: "latency and upstream timeout must not be negative"},
		{name: "httpbin", mutate: func(c *Config) { c.Persona = PersonaHTTPBin }},
		{name: "unknown persona", mutate: func(c *Config) { c.Persona = "bookstore" }, want: `persona "bookstore" is not known (known: httpbin, go-httpbin, sleep, bookinfo-productpage, bookinfo-details, bookinfo-reviews-v1, bookinfo-reviews-v2, bookinfo-reviews-v3, bookinfo-ratings, helloworld, tcp-echo, grpc-echo, fortio, nginx, squid, opentelemetry-collector, zipkin, jaeger, grafana, kiali)`},
		{name: "tcp-echo", mutate: func(c *Config) { c.Persona, c.PersonaArgs, c.Ports = PersonaTCPEcho, []string{"9000,9001", "one"}, nil }},
		{name: "tcp-echo bad port", mutate: func(c *Config) { c.Persona, c.PersonaArgs = PersonaTCPEcho, []string{"9000,x", "one"} }, want: `tcp-echo port "x" is not a number between 1 and 65535`},
		{name: "args of a persona without any", mutate: func(c *Config) { c.Persona, c.PersonaArgs = PersonaHTTPBin, []string{"x"} }, want: `persona "httpbin" takes no arguments`},
		{name: "sleep needs no port", mutate: func(c *Config) { c.Persona, c.Ports = PersonaSleep, nil }},
		{name: "persona with faults", mutate: func(c *Config) { c.Persona, c.Latency = PersonaHTTPBin, time.Second }, want: "persona httpbin answers as the sample app does: latency, error rate and upstreams are the demo app's (use its /delay/{n} and /status/{codes})"},
		{name: "upstream", mutate: func(c *Config) { c.Upstreams = []string{"backend:8080"} }, want: `upstream "backend:8080" is not an http:// or https:// URL with a host`},
	}
	for _, tt := range tests {
		c := base
		tt.mutate(&c)
		err := c.validate()
		if got := errString(err); got != tt.want {
			t.Errorf("%s: validate() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
