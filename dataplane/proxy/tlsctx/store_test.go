package tlsctx

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// storeWith compiles secrets into a new Store.
func storeWith(t testing.TB, secrets ...*tlsv3.Secret) *Store {
	t.Helper()
	st := NewStore()
	for _, s := range secrets {
		sec, err := CompileSecret(s, "v1")
		if err != nil {
			t.Fatal(err)
		}
		st.Set(sec)
	}
	return st
}
