package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns"
)

// istiod resolves a RequestAuthentication's jwksUri itself and sends the keys inline
// (PILOT_JWT_ENABLE_REMOTE_JWKS=false, its default); a URI it cannot fetch gets a key set
// no token verifies with, so every token for that issuer is refused. The lab does the
// same: it fetches each URI from inside the lab (the node namespace, which reaches the
// Services and the outside world, never the host's network), with the cluster DNS and
// the pods' trust bundle, and puts the keys in the model before the generator runs.
// Keys are kept per URI for the lab's life; istiod refreshes them every 20 minutes,
// which a lab does not need.

const (
	jwksFetchTimeout = 5 * time.Second
	jwksMaxBytes     = 1 << 20 // far above any real key set
)

// jwksCache holds the key sets fetched, by URI.
type jwksCache struct {
	mu   sync.Mutex
	keys map[string]string
}

// jwksURIs lists the jwksUri values m's RequestAuthentications need fetched (rules with
// inline keys need none), with the namespace of the first object naming each.
func jwksURIs(m *model.Model) map[string]string {
	out := map[string]string{}
	for _, ra := range m.Istio.RequestAuthentications {
		for _, r := range ra.Spec.GetJwtRules() {
			if u := r.GetJwksUri(); u != "" && r.GetJwks() == "" {
				if _, ok := out[u]; !ok {
					out[u] = ra.Namespace
				}
			}
		}
	}
	return out
}

// withJWKS returns m with the key sets of its jwksUri values, fetching those not yet
// known. m itself is not changed (other readers hold it); a copy carries the keys. It
// returns m as is when nothing needs fetching or before the lab's network exists.
func (l *Lab) withJWKS(ctx context.Context, m *model.Model) *model.Model {
	uris := jwksURIs(m)
	if len(uris) == 0 || l.world == nil || l.kubeDNS == nil {
		return m
	}
	l.jwks.mu.Lock()
	defer l.jwks.mu.Unlock()
	if l.jwks.keys == nil {
		l.jwks.keys = map[string]string{}
	}
	keys := map[string]string{}
	for u, ns := range uris {
		if k, ok := l.jwks.keys[u]; ok {
			keys[u] = k
			continue
		}
		k, err := l.fetchJWKS(ctx, u, ns)
		if err != nil {
			msg := fmt.Sprintf("jwksUri %s: %v; tokens of its issuer are refused until it can be fetched", u, err)
			l.log.Warn("fetch JWKS", "uri", u, "err", err)
			l.publish(EventJWKSFailed, "", msg, map[string]any{"uri": u, "error": err.Error()})
			continue // not cached: the next push tries again
		}
		l.jwks.keys[u], keys[u] = k, k
	}
	c := *m
	c.Istio.JWKS = keys
	return &c
}

// EventJWKSFailed is published when a jwksUri cannot be fetched.
const EventJWKSFailed = "jwks.failed"

// fetchJWKS GETs uri from the node namespace, resolving its host as a pod of ns would,
// and returns the key set if it parses as one with at least one key.
func (l *Lab) fetchJWKS(ctx context.Context, uri, ns string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", err
	}
	roots, err := l.jwksRoots()
	if err != nil {
		return "", err
	}
	node := NodeNamespace(l.opts.Name)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			a, ok := l.kubeDNS.lookup(ns, host)
			if !ok {
				return nil, fmt.Errorf("no such host %q in the lab (its Services and outside world)", host)
			}
			ip = a
		}
		return netns.DialContext(ctx, node, network, net.JoinHostPort(ip.String(), port))
	}
	client := &http.Client{
		Timeout: jwksFetchTimeout,
		Transport: &http.Transport{
			DialContext:     dial,
			TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			Proxy:           nil, // never the host's proxy settings: nothing leaves the lab
		},
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if len(body) > jwksMaxBytes {
		return "", fmt.Errorf("the key set is over %d bytes", jwksMaxBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return "", fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	if len(set.Keys) == 0 {
		return "", errors.New("the key set has no keys")
	}
	return string(body), nil
}

// jwksRoots is what the fetch trusts: the pods' bundle (the host's roots plus the outside
// world's public CA), as istiod trusts its system roots.
func (l *Lab) jwksRoots() (*x509.CertPool, error) {
	pem, err := os.ReadFile(l.world.bundlePath)
	if err != nil {
		return nil, fmt.Errorf("read the trust bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", l.world.bundlePath)
	}
	return pool, nil
}
