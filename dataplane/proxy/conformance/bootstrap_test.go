package conformance

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// upstreams are the real servers behind the proxy: a and b echo who they are and the
// request headers they received; slow answers after 2 s; flaky answers 503 to every odd
// request and 200 to every even one.
type upstreams struct {
	a, b, slow, flaky string // host:port
}

func startUpstreams(t *testing.T) upstreams {
	t.Helper()
	serve := func(h http.HandlerFunc) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.Listener.Addr().String()
	}
	echo := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Served-By", name)
			w.Header().Set("X-Remove-Me", "upstream")
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"server": name, "path": r.URL.Path, "headers": r.Header})
		}
	}
	var n atomic.Int64
	return upstreams{
		a: serve(echo("a")),
		b: serve(echo("b")),
		slow: serve(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}),
		flaky: serve(func(w http.ResponseWriter, _ *http.Request) {
			if n.Add(1)%2 == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("X-Served-By", "flaky")
		}),
	}
}

func staticCluster(t *testing.T, name, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return fmt.Sprintf(`{"name":%q,"type":"STATIC","connect_timeout":"1s","load_assignment":{"cluster_name":%q,"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":%q,"port_value":%d}}}}]}]}}`,
		name, name, host, p)
}

const faultType = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"

// routes is the route table every case reads; each case has its own path prefix.
const routes = `[
 {"match":{"prefix":"/direct"},"direct_response":{"status":418,"body":{"inline_string":"direct"}}},
 {"match":{"prefix":"/redirect"},"redirect":{"host_redirect":"example.com","path_redirect":"/moved"}},
 {"match":{"prefix":"/abort"},"route":{"cluster":"a"},"typed_per_filter_config":{"envoy.filters.http.fault":{"@type":"` + faultType + `","abort":{"http_status":503,"percentage":{"numerator":100}}}}},
 {"match":{"prefix":"/delay"},"route":{"cluster":"a"},"typed_per_filter_config":{"envoy.filters.http.fault":{"@type":"` + faultType + `","delay":{"fixed_delay":"0.3s","percentage":{"numerator":100}}}}},
 {"match":{"prefix":"/slow"},"route":{"cluster":"slow","timeout":"0.2s"}},
 {"match":{"prefix":"/flaky"},"route":{"cluster":"flaky","retry_policy":{"retry_on":"5xx","num_retries":2}}},
 {"match":{"prefix":"/weighted"},"route":{"weighted_clusters":{"clusters":[{"name":"a","weight":1},{"name":"b","weight":1}]}}},
 {"match":{"prefix":"/h","headers":[{"name":"x-pick","string_match":{"exact":"b"}}]},"route":{"cluster":"b"}},
 {"match":{"prefix":"/hdr"},"route":{"cluster":"a"},
  "request_headers_to_add":[{"header":{"key":"x-added-req","value":"yes"}}],
  "request_headers_to_remove":["x-drop-me"],
  "response_headers_to_add":[{"header":{"key":"x-added-resp","value":"yes"}}],
  "response_headers_to_remove":["x-remove-me"]},
 {"match":{"prefix":"/b"},"route":{"cluster":"b"}},
 {"match":{"prefix":"/"},"route":{"cluster":"a"}}
]`

// bootstrap is a static bootstrap: an admin on 127.0.0.1:0, one HTTP listener on
// listenPort with the route table above, the fault and router filters, and a file access
// log in Envoy's default format.
func bootstrap(t *testing.T, u upstreams, listenPort int, accessLog string) string {
	t.Helper()
	return fmt.Sprintf(`{"node":{"id":"conformance","cluster":"conformance"},
"admin":{"address":{"socket_address":{"address":"127.0.0.1","port_value":0}}},
"static_resources":{
 "clusters":[%s,%s,%s,%s],
 "listeners":[{"name":"web","address":{"socket_address":{"address":"127.0.0.1","port_value":%d}},
  "filter_chains":[{"filters":[{"name":"envoy.filters.network.http_connection_manager","typed_config":{
   "@type":"type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
   "stat_prefix":"web",
   "access_log":[{"name":"envoy.access_loggers.file","typed_config":{"@type":"type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog","path":%q}}],
   "route_config":{"name":"local","virtual_hosts":[{"name":"all","domains":["*"],"routes":%s}]},
   "http_filters":[
    {"name":"envoy.filters.http.fault","typed_config":{"@type":"`+faultType+`"}},
    {"name":"envoy.filters.http.router","typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}]}}`,
		staticCluster(t, "a", u.a), staticCluster(t, "b", u.b), staticCluster(t, "slow", u.slow), staticCluster(t, "flaky", u.flaky),
		listenPort, accessLog, routes)
}
