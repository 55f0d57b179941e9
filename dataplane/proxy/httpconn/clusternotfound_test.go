package httpconn

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// cluster_not_found_response_code (istiod's INTERNAL_SERVER_ERROR on Gateway API routes)
// is the status of the reply when the route's cluster does not exist; unset, 503.
func TestClusterNotFoundResponseCode(t *testing.T) {
	for code, want := range map[routev3.RouteAction_ClusterNotFoundResponseCode]int{
		routev3.RouteAction_SERVICE_UNAVAILABLE:   http.StatusServiceUnavailable,
		routev3.RouteAction_NOT_FOUND:             http.StatusNotFound,
		routev3.RouteAction_INTERNAL_SERVER_ERROR: http.StatusInternalServerError,
	} {
		rt, err := CompileRoutes(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
			Routes: []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "gone"},
					ClusterNotFoundResponseCode: code}}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		_, r := rt.Match("x", "/")
		if r.ClusterNotFoundCode != want {
			t.Errorf("%s: %d, want %d", code, r.ClusterNotFoundCode, want)
		}
	}
}
