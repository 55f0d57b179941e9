package tlsctx

import (
	"context"
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// istioCiphers is the list istiod puts on inbound mTLS chains (SupportedCiphers).
var istioCiphers = []string{
	"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES128-GCM-SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-GCM-SHA256",
}

func TestCipherSuitesMapEnvoyNamesToGoAndRefuseOthersByName(t *testing.T) {
	c := &Context{Sources: map[string]Source{}}
	err := c.fillCommon(&tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{CipherSuites: istioCiphers}})
	if err != nil {
		t.Fatalf("Istio's cipher suites: %v", err)
	}
	want := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_RSA_WITH_AES_128_GCM_SHA256}
	if !slices.Equal(c.CipherSuites, want) {
		t.Errorf("suites = %v, want %v", c.CipherSuites, want)
	}
	if got := c.ServerConfig(NewStore()); got.GetConfigForClient == nil {
		t.Fatal("no per-client config")
	} else if cfg, _ := got.GetConfigForClient(&tls.ClientHelloInfo{}); !slices.Equal(cfg.CipherSuites, want) {
		t.Errorf("server config suites = %v", cfg.CipherSuites)
	}
	if got := c.ClientConfig(NewStore()).CipherSuites; !slices.Equal(got, want) {
		t.Errorf("client config suites = %v", got)
	}
	if got, err := compileCipherSuites([]string{"[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]"}); err != nil || len(got) != 2 {
		t.Errorf("equal-preference group: %v, %v", got, err)
	}
	err = (&Context{Sources: map[string]Source{}}).fillCommon(&tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{
		CipherSuites: []string{"ECDHE-RSA-AES128-GCM-SHA256", "PSK-AES128-CBC-SHA"}}})
	if err == nil || !strings.Contains(err.Error(), `tls_params.cipher_suites[1]: cipher suite "PSK-AES128-CBC-SHA"`) {
		t.Errorf("err = %v, want the unknown suite refused by name", err)
	}
}

func TestALPNOverrideTravelsInTheContext(t *testing.T) {
	ctx := WithALPN(context.Background(), NewALPN([]string{"istio-http/1.1", "istio", "http/1.1"}))
	if got := ALPNFrom(ctx); !slices.Equal(got.Protos, []string{"istio-http/1.1", "istio", "http/1.1"}) || got.Key != "istio-http/1.1,istio,http/1.1" {
		t.Errorf("ALPNFrom = %+v", got)
	}
	if got := ALPNFrom(context.Background()); got != nil {
		t.Errorf("no override: %v", got)
	}
}
