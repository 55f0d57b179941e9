package accesslog

import "testing"

// TestConnectionFieldsRenderAsEnvoy pins the connection-level operators the listener,
// the TLS transport sockets and the upstream connection fill: present values as set,
// absent ones as "-", and the transport failure reason with its spaces replaced by
// underscores as Envoy's formatter writes it.
func TestConnectionFieldsRenderAsEnvoy(t *testing.T) {
	f, err := parseFormat("%FILTER_CHAIN_NAME% %REQUESTED_SERVER_NAME% %UPSTREAM_LOCAL_ADDRESS% %UPSTREAM_TRANSPORT_FAILURE_REASON% %CONNECTION_TERMINATION_DETAILS%")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		info Info
		want string
	}{
		{name: "unset_fields_are_dashes", want: "- - - - -"},
		{name: "inbound_mtls_connection", info: Info{FilterChainName: "0.0.0.0_8080", RequestedServerName: "outbound_.8080_._.backend.default.svc.cluster.local",
			UpstreamLocal: "127.0.0.6:41234"},
			want: "0.0.0.0_8080 outbound_.8080_._.backend.default.svc.cluster.local 127.0.0.6:41234 - -"},
		{name: "transport_failure_reason_spaces_become_underscores", info: Info{
			UpstreamTransportFailureReason: "TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end",
			ConnectionTerminationDetails:   "rbac_access_denied_matched_policy[none]"},
			want: "- - - TLS_error:|268435581:SSL_routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end rbac_access_denied_matched_policy[none]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.render(&tc.info); got != tc.want {
				t.Errorf("render\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
