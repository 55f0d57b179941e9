// Package demoapp is meshlab's built-in demo workload (`meshlab app`): an HTTP service
// that answers every request with its identity and the headers it received, calls its
// upstreams on requests to "/" and nests their answers, and injects latency and errors on
// demand. It is what the pods of a scenario run unless their Workload names a command.
package demoapp

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Defaults used when a Config field is zero.
const (
	DefaultErrorCode       = 500
	DefaultUpstreamTimeout = 5 * time.Second
)

// Personas: the sample apps the built-in app can stand in for.
const (
	// PersonaHTTPBin makes the app answer as httpbin (httpbin.go).
	PersonaHTTPBin = "httpbin"
	// PersonaGoHTTPBin makes the app answer as go-httpbin (gohttpbin.go), the image
	// Istio's samples/httpbin runs today.
	PersonaGoHTTPBin = "go-httpbin"
	// PersonaSleep serves nothing: a pod to exec into, as Istio's curl/sleep sample.
	PersonaSleep = "sleep"
	// PersonaFortio is fortio's server (its echo on 8080), served by package
	// demoapp/fortio, which `meshlab app` runs instead of Run; `fortio load` and `fortio
	// curl` run in its pod with `meshlab exec`.
	PersonaFortio = "fortio"
	// PersonaGRPCEcho is a proxyless gRPC app, as Istio's grpc-echo sample: it serves the
	// standard gRPC health service on its ports as an xDS-enabled gRPC server when the pod
	// has a gRPC bootstrap (GRPC_XDS_BOOTSTRAP, the grpc-agent template), else as a plain
	// one. Every answer carries the serving pod ("x-pod") and the SPIFFE identity of the
	// caller it saw over mTLS ("x-peer", "none" over plaintext), so a caller learns who
	// answered and whether the connection was mutual TLS. Package demoapp/grpcecho serves
	// it, registered with RegisterGRPCEcho (`meshlab app` links it, meshlab-app does not).
	PersonaGRPCEcho = "grpc-echo"
)

// LinksAll reports whether persona is served by `meshlab app` only: fortio's server,
// grpc-echo and the OTLP receivers of the collector and of Jaeger bring packages
// (fortio's, gRPC's, OTLP's types) the small meshlab-app binary leaves out so that an
// app costs little to start and to keep.
func LinksAll(persona string) bool {
	return persona == PersonaFortio || persona == PersonaGRPCEcho || persona == PersonaOTelCollector || persona == PersonaJaeger
}

// Personas are the sample apps the built-in app stands in for (bookinfo.go has Bookinfo's).
var Personas = []string{
	PersonaHTTPBin, PersonaGoHTTPBin, PersonaSleep, PersonaProductPage, PersonaDetails,
	PersonaReviewsV1, PersonaReviewsV2, PersonaReviewsV3, PersonaRatings,
	PersonaHelloWorld, PersonaTCPEcho, PersonaGRPCEcho, PersonaFortio, PersonaNginx,
	PersonaSquid, PersonaOTelCollector, PersonaZipkin, PersonaJaeger, PersonaGrafana,
	PersonaKiali,
}

// Config is what one demo app instance is and does.
type Config struct {
	// Service, Pod, Namespace and Version are the identity it reports (optional).
	Service, Pod, Namespace, Version string
	// Ports are the ports it listens on (required, at least one).
	Ports []uint16
	// Address is the address it listens on (optional, default 0.0.0.0: every address of
	// the pod, as a container's app does).
	Address netip.Addr
	// Upstreams are URLs called, in order, on each request to "/"; their JSON answers are
	// nested in the response's "upstreams" (optional).
	Upstreams []string
	// UpstreamTimeout bounds each upstream call (optional, default 5s).
	UpstreamTimeout time.Duration
	// StartupCalls are URLs called once, in order, as the app starts (not retried);
	// their outcome is logged and reported in every answer's "startup" (optional).
	StartupCalls []string

	// Persona is the sample app the app answers as: "" for the demo app itself, or
	// PersonaHTTPBin (optional).
	Persona string
	// PersonaArgs are the persona's own arguments, as the sample image takes them (the
	// container's args; tcp-echo's ports and prefix) (optional).
	PersonaArgs []string
	// VolumeRoot is where the pod's volume files are, each below it at its path in the
	// container (/etc/nginx/nginx.conf as <root>/etc/nginx/nginx.conf): the nginx
	// persona reads its nginx.conf and certificates there (optional).
	VolumeRoot string

	// Injectable faults, for labs.

	// Latency delays every answer except /healthz (optional).
	Latency time.Duration
	// ErrorRate is the fraction of requests answered with ErrorCode, drawn from a random
	// sequence seeded with Seed, so a run is reproducible (optional, 0 to 1).
	ErrorRate float64
	// ErrorCode is the status of an injected error (optional, default 500).
	ErrorCode int
	// Seed seeds the error draw (optional).
	Seed uint64
}

// Args returns the command line, after "meshlab app", that makes `meshlab app` run with
// c. Zero fields are left out, so they take their defaults.
func Args(c Config) []string {
	var args []string
	add := func(name, value string) { args = append(args, "--"+name+"="+value) }
	for _, f := range []struct{ name, value string }{
		{"service", c.Service}, {"pod", c.Pod}, {"namespace", c.Namespace}, {"version", c.Version},
		{"persona", c.Persona}, {"volume-root", c.VolumeRoot},
	} {
		if f.value != "" {
			add(f.name, f.value)
		}
	}
	for _, a := range c.PersonaArgs {
		add("persona-arg", a)
	}
	for _, p := range c.Ports {
		add("port", strconv.Itoa(int(p)))
	}
	if c.Address.IsValid() {
		add("address", c.Address.String())
	}
	for _, u := range c.Upstreams {
		add("upstream", u)
	}
	for _, u := range c.StartupCalls {
		add("startup-call", u)
	}
	if c.UpstreamTimeout != 0 {
		add("upstream-timeout", c.UpstreamTimeout.String())
	}
	if c.Latency != 0 {
		add("latency", c.Latency.String())
	}
	if c.ErrorRate != 0 {
		add("error-rate", strconv.FormatFloat(c.ErrorRate, 'g', -1, 64))
	}
	if c.ErrorCode != 0 {
		add("error-code", strconv.Itoa(c.ErrorCode))
	}
	if c.Seed != 0 {
		add("seed", strconv.FormatUint(c.Seed, 10))
	}
	return args
}

// AddFlags binds the flags Args writes to the fields of c, so that parsing Args(x) into
// a fresh Config gives back x.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Service, "service", "", "service name the app reports")
	fs.StringVar(&c.Pod, "pod", "", "pod name the app reports")
	fs.StringVar(&c.Namespace, "namespace", "", "namespace the app reports")
	fs.StringVar(&c.Version, "version", "", "version the app reports")
	fs.StringVar(&c.Persona, "persona", "", "sample app to stand in for: "+strings.Join(Personas, ", ")+" (default: the demo app)")
	fs.StringArrayVar(&c.PersonaArgs, "persona-arg", nil, "argument of the persona, as its sample image takes it (repeatable, in order)")
	fs.StringVar(&c.VolumeRoot, "volume-root", "", "directory holding the pod's volume files at their container paths (the nginx persona reads /etc/nginx/nginx.conf there, squid /etc/squid/squid.conf)")
	fs.Var((*portsValue)(&c.Ports), "port", "port to listen on (repeatable)")
	fs.TextVar(&c.Address, "address", netip.Addr{}, "address to listen on (default 0.0.0.0)")
	fs.StringArrayVar(&c.Upstreams, "upstream", nil, "URL to call on each request to / (repeatable, in order)")
	fs.StringArrayVar(&c.StartupCalls, "startup-call", nil, "URL to call once at startup (repeatable, in order)")
	fs.DurationVar(&c.UpstreamTimeout, "upstream-timeout", 0, "timeout of each upstream call (default 5s)")
	fs.DurationVar(&c.Latency, "latency", 0, "delay added to every answer but /healthz")
	fs.Float64Var(&c.ErrorRate, "error-rate", 0, "fraction of requests answered with --error-code (0 to 1)")
	fs.IntVar(&c.ErrorCode, "error-code", 0, "status of injected errors (default 500)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the error draw")
}

// validate reports the first problem with c.
func (c *Config) validate() error {
	if c.Persona == PersonaTCPEcho {
		if _, _, err := tcpEchoArgs(c.PersonaArgs); err != nil {
			return err
		}
	} else if len(c.PersonaArgs) > 0 {
		return fmt.Errorf("persona %q takes no arguments", c.Persona)
	}
	if len(c.Ports) == 0 && c.Persona != PersonaSleep && c.Persona != PersonaTCPEcho && c.Persona != PersonaSquid && !isTracingAddon(c.Persona) {
		return errors.New("at least one port is required")
	}
	if c.Persona != "" && !slices.Contains(Personas, c.Persona) {
		return fmt.Errorf("persona %q is not known (known: %s)", c.Persona, strings.Join(Personas, ", "))
	}
	if c.Persona != "" && (c.Latency != 0 || c.ErrorRate != 0 || len(c.Upstreams) > 0) {
		return fmt.Errorf("persona %s answers as the sample app does: latency, error rate and upstreams are the demo app's (use its /delay/{n} and /status/{codes})", c.Persona)
	}
	if c.ErrorRate < 0 || c.ErrorRate > 1 {
		return fmt.Errorf("error rate %g is not between 0 and 1", c.ErrorRate)
	}
	if c.ErrorCode != 0 && (c.ErrorCode < 200 || c.ErrorCode > 599) {
		return fmt.Errorf("error code %d is not an HTTP status between 200 and 599", c.ErrorCode)
	}
	if c.Latency < 0 || c.UpstreamTimeout < 0 {
		return errors.New("latency and upstream timeout must not be negative")
	}
	for _, u := range append(append([]string(nil), c.Upstreams...), c.StartupCalls...) {
		parsed, err := url.Parse(u)
		if err != nil {
			return fmt.Errorf("parse upstream: %w", err)
		}
		if parsed.Scheme != "http" && parsed.Scheme != "https" || parsed.Host == "" {
			return fmt.Errorf("upstream %q is not an http:// or https:// URL with a host", u)
		}
	}
	return nil
}

// portsValue is a repeatable --port flag holding validated port numbers.
type portsValue []uint16

func (p *portsValue) String() string {
	s := ""
	for i, port := range *p {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(int(port))
	}
	return s
}

func (p *portsValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("port %q is not a number between 1 and 65535", s)
	}
	*p = append(*p, uint16(n))
	return nil
}

func (p *portsValue) Type() string { return "port" }

// isTracingAddon reports whether persona is a tracing addon's (tracestore.go), which
// listens on its image's ports whatever the container declares.
func isTracingAddon(persona string) bool {
	return persona == PersonaZipkin || persona == PersonaJaeger
}
