package tlsctx

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
)

// cipherSuites maps BoringSSL's cipher names, as Envoy's tls_params.cipher_suites takes
// them, to crypto/tls's TLS 1.0-1.2 suites. TLS 1.3 suites are not configurable in
// BoringSSL either. A name missing here (CHACHA20 variants under other spellings,
// PSK and 3DES-less legacy suites Go does not implement) is refused by name.
var cipherSuites = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
}

// compileCipherSuites converts tls_params.cipher_suites. Envoy's "[A|B]" equal-preference
// groups are flattened in order: crypto/tls has no equal-preference groups, and
// since Go 1.17 it orders suites by its own preference anyway, so only the set of
// allowed suites is observable.
func compileCipherSuites(names []string) ([]uint16, error) {
	var out []uint16
	for i, n := range names {
		for _, name := range strings.Split(strings.Trim(n, "[]"), "|") {
			id, ok := cipherSuites[name]
			if !ok {
				return nil, fmt.Errorf("tls_params.cipher_suites[%d]: cipher suite %q is not supported by meshlab proxy (Go's crypto/tls lacks it)", i, name)
			}
			out = append(out, id)
		}
	}
	return out, nil
}

type alpnKey struct{}

// ALPN is an upstream ALPN override: the protocols a TLS upstream connection offers,
// and Key, their joined form, which keys connection pools (Envoy keys its pools by
// them). Made once per configuration, so a request carrying it allocates nothing.
type ALPN struct {
	Protos []string
	Key    string
}

// NewALPN returns the override offering protos, nil for none.
func NewALPN(protos []string) *ALPN {
	if len(protos) == 0 {
		return nil
	}
	return &ALPN{Protos: protos, Key: strings.Join(protos, ",")}
}

// WithALPN returns ctx carrying an upstream ALPN override (istio.alpn's filter state,
// Envoy's envoy.network.application_protocols): a TLS upstream connection dialed under
// ctx offers these protocols instead of the context's alpn_protocols.
func WithALPN(ctx context.Context, a *ALPN) context.Context {
	return context.WithValue(ctx, alpnKey{}, a)
}

// ALPNFrom returns the ALPN override of ctx, nil for none.
func ALPNFrom(ctx context.Context) *ALPN {
	a, _ := ctx.Value(alpnKey{}).(*ALPN)
	return a
}
