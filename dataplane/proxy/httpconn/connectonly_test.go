package httpconn

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// connectRoute is istiod's connect_terminate route: connect_matcher, terminated by the
// route's CONNECT upgrade with connect_config.
func connectRoute() *routev3.Route {
	return &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "main_internal"},
			UpgradeConfigs: []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "CONNECT",
				ConnectConfig: &routev3.RouteAction_UpgradeConfig_ConnectConfig{}}},
		}},
	}
}

// Only an HCM whose every route is a CONNECT one, with CONNECT upgraded and allowed on
// HTTP/2 (istiod's connect_terminate), goes to the proxy's own CONNECT server.
func TestConnectOnlyHCMChoosesTheConnectServer(t *testing.T) {
	hcm := func(allow bool, routes ...*routev3.Route) *Config {
		t.Helper()
		h := &hcmv3.HttpConnectionManager{
			StatPrefix: "connect_terminate",
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "default",
				VirtualHosts: []*routev3.VirtualHost{{Name: "default", Domains: []string{"*"}, Routes: routes}}}},
			HttpFilters: []*hcmv3.HttpFilter{
				{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}},
			},
			Http2ProtocolOptions: &corev3.Http2ProtocolOptions{AllowConnect: allow},
			UpgradeConfigs:       []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}},
		}
		cfg, err := Compile(mustAny(t, h))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if !hcm(true, connectRoute()).connectOnly() {
		t.Error("istiod's connect_terminate HCM is not served by the CONNECT server")
	}
	if hcm(false, connectRoute()).connectOnly() {
		t.Error("an HCM without allow_connect is served by the CONNECT server")
	}
	if hcm(true, connectRoute(), routeTo(prefix("/"), to("h2"))).connectOnly() {
		t.Error("an HCM with a non-CONNECT route is served by the CONNECT server")
	}
	if compileTestHCM(t, t.TempDir()+"/log", routeTo(prefix("/"), to("h2"))).connectOnly() {
		t.Error("a plain HCM is served by the CONNECT server")
	}
}
