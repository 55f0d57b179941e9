package httpconn

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestRemoteAddressFromXForwardedFor: without use_remote_address the HCM trusts the last
// x-forwarded-for entry as the client (xff_num_trusted_hops 0), as Envoy: RBAC's
// remote_ip (Istio's remoteIpBlocks) and %DOWNSTREAM_REMOTE_ADDRESS% follow it, while
// direct_remote_ip and %DOWNSTREAM_DIRECT_REMOTE_ADDRESS% stay the peer.
func TestRemoteAddressFromXForwardedFor(t *testing.T) {
	deny := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{
		"ns[default]-policy[block-remote]-rule[0]": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_RemoteIp{
				RemoteIp: &corev3.CidrRange{AddressPrefix: "203.0.113.0", PrefixLen: wrapperspb.UInt32(24)}}}},
		}}}}
	for _, useRemote := range []bool{false, true} {
		l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
			h.UseRemoteAddress = wrapperspb.Bool(useRemote)
			h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.rbac",
				ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, deny)}}}, h.HttpFilters...)
			var f filev3.FileAccessLog
			if err := h.AccessLog[0].GetTypedConfig().UnmarshalTo(&f); err != nil {
				t.Fatal(err)
			}
			f.AccessLogFormat = &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
					InlineString: "%RESPONSE_CODE% %DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%\n"}}}}}
			h.AccessLog[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &f)}
		})
		resp, _ := l.get(t, "/", "X-Forwarded-For", "198.51.100.7, 203.0.113.9")
		want := http.StatusForbidden
		if useRemote {
			want = http.StatusOK // the client is the peer, 127.0.0.1
		}
		if resp.StatusCode != want {
			t.Errorf("use_remote_address %v: status %d, want %d", useRemote, resp.StatusCode, want)
		}
		if useRemote {
			continue
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, _ := os.ReadFile(l.logPath)
			if strings.Contains(string(b), "403 203.0.113.9:0 127.0.0.1") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("access log %q, want 403 203.0.113.9:0 127.0.0.1", b)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
