package httpconn

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestCompileHTTPFilterChain(t *testing.T) {
	router := &hcmv3.HttpFilter{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}
	fault := &hcmv3.HttpFilter{Name: "envoy.filters.http.fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &faultv3.HTTPFault{})}}
	cors := &hcmv3.HttpFilter{Name: "envoy.filters.http.cors", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routev3.CorsPolicy{})}}
	for _, tc := range []struct {
		name    string
		filters []*hcmv3.HttpFilter
		want    string
	}{
		{"fault then router, as Istio", []*hcmv3.HttpFilter{fault, router}, ""},
		{"router must be last", []*hcmv3.HttpFilter{router, fault}, "http_filters[0]: the router must be the last filter"},
		{"other filters are refused by name", []*hcmv3.HttpFilter{cors, router}, "http_filters[0]: typed_config: unsupported type envoy.config.route.v3.CorsPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "x", HttpFilters: tc.filters,
				RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{}}})
			cfg, err := Compile(a)
			if tc.want == "" {
				if err != nil || len(cfg.Filters) != 1 || cfg.Filters[0].Fault == nil || cfg.Filters[0].Name != "envoy.filters.http.fault" {
					t.Errorf("err = %v, cfg = %+v", err, cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
