package tlsctx

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// storeWith compiles secrets into a new Store.
func storeWith(tb testing.TB, secrets ...*tlsv3.Secret) *Store {
	tb.Helper()
	st := NewStore()
	for _, s := range secrets {
		sec, err := CompileSecret(s, "v1")
		if err != nil {
			tb.Fatal(err)
		}
		st.Set(sec)
	}
	return st
}
