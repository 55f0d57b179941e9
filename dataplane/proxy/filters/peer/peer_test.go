package peer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

func node(t *testing.T, id, pod, ns, app, version string) *Node {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{
		"NAME": pod, "NAMESPACE": ns, "CLUSTER_ID": "Kubernetes", "WORKLOAD_NAME": app + "-" + version,
		"OWNER":  "kubernetes://apis/apps/v1/namespaces/" + ns + "/deployments/" + app + "-" + version,
		"LABELS": map[string]any{"app": app, "version": version, LabelCanonicalName: app, LabelCanonicalRevision: version, "other": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := FromStruct(md, nil)
	return newNode(id, w, md)
}

func TestWorkloadHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	n := node(t, "sidecar~10.0.0.1~a.default~default.svc.cluster.local", "productpage-1", "default", "productpage", "v1")
	w, ok := ParseHeader(n.Header, nil)
	if !ok {
		t.Fatal("header did not parse")
	}
	if !reflect.DeepEqual(w, n.Workload) {
		t.Fatalf("round trip: got %+v, want %+v", w, n.Workload)
	}
	if w.Labels != nil {
		t.Fatalf("label %q kept without additional_labels", "other")
	}
	if _, ok := ParseHeader("not base64!", nil); ok {
		t.Fatal("garbage parsed as a peer header")
	}
	if SANNamespace("spiffe://cluster.local/ns/bookinfo/sa/reviews") != "bookinfo" || SANNamespace("spiffe://x") != "" {
		t.Fatal("SANNamespace")
	}
	if w, ok := FromEndpoint("reviews-v2;default;reviews;v2;Kubernetes"); !ok || w.WorkloadName != "reviews-v2" || w.CanonicalRevision != "v2" || w.Cluster != "Kubernetes" {
		t.Fatalf("FromEndpoint: %+v %v", w, ok)
	}
}

func TestFrameIsIstioWireFormat(t *testing.T) {
	t.Parallel()
	n := node(t, "id-1", "p", "ns", "a", "v")
	f := Frame(n)
	if binary.BigEndian.Uint32(f) != 0x3D230467 || int(binary.BigEndian.Uint32(f[4:])) != len(f)-8 {
		t.Fatalf("header %x", f[:8])
	}
	w, id, err := ParsePayload(f[8:], nil)
	if err != nil || id != "id-1" || w.WorkloadName != "a-v" || w.App != "a" {
		t.Fatalf("payload: %+v %q %v", w, id, err)
	}
}

// tlsPair returns both ends of a TLS connection over a real loopback socket, each end
// offering alpn.
func tlsPair(t *testing.T, clientALPN, serverALPN []string) (client, server *tls.Conn) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"x"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	ch := make(chan *tls.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- nil
			return
		}
		s := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: serverALPN})
		if s.Handshake() != nil {
			ch <- nil
			return
		}
		ch <- s
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: clientALPN}) //nolint:gosec // test peer
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	s := <-ch
	if s == nil {
		t.Fatal("server handshake failed")
	}
	t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	return c, s
}

func TestExchangeBetweenTwoSidecars(t *testing.T) {
	t.Parallel()
	alpn := []string{"istio-peer-exchange", "istio"}
	c, s := tlsPair(t, alpn, alpn)
	st := NewMXStats(stats.NewStore())
	client := node(t, "client-id", "sleep-1", "default", "sleep", "v1")
	server := node(t, "server-id", "tcp-echo-1", "apps", "tcp-echo", "v2")
	mx := &MX{Protocol: "istio-peer-exchange"}
	cc, cx := (&MX{Protocol: "istio-peer-exchange", Upstream: true}).wrap(c, st, client)
	sc, sx := mx.wrap(s, st, server)
	if cx == nil || sx == nil {
		t.Fatal("exchange not started on istio-peer-exchange")
	}
	go func() {
		_, _ = cc.Write([]byte("hello"))
	}()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("server read %q, %v: the exchange header leaked into or ate the data", buf, err)
	}
	w, id, ok := sx.Peer()
	if !ok || id != "client-id" || w.WorkloadName != "sleep-v1" || w.Namespace != "default" {
		t.Fatalf("server sees peer %+v %q %v", w, id, ok)
	}
	go func() { _, _ = sc.Write([]byte("world")) }()
	if _, err := io.ReadFull(cc, buf); err != nil || string(buf) != "world" {
		t.Fatalf("client read %q, %v", buf, err)
	}
	w, id, ok = cx.Peer()
	if !ok || id != "server-id" || w.App != "tcp-echo" || w.Version != "v2" || w.Namespace != "apps" {
		t.Fatalf("client sees peer %+v %q %v", w, id, ok)
	}
	if st.ALPNFound.Value() != 2 || st.MetadataAdded.Value() != 2 {
		t.Fatalf("alpn_protocol_found %d metadata_added %d, want 2 and 2", st.ALPNFound.Value(), st.MetadataAdded.Value())
	}
}

func TestExchangePassesThroughAPeerWithoutIt(t *testing.T) {
	t.Parallel()
	alpn := []string{"istio-peer-exchange"}
	c, s := tlsPair(t, alpn, alpn)
	st := NewMXStats(stats.NewStore())
	sc, sx := (&MX{Protocol: "istio-peer-exchange"}).wrap(s, st, node(t, "s", "p", "n", "a", "v"))
	go func() { _, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) }()
	buf := make([]byte, 18)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "GET / HTTP/1.1\r\n\r\n" {
		t.Fatalf("read %q, %v: a foreign first chunk must pass untouched", buf, err)
	}
	if _, _, ok := sx.Peer(); ok || !sx.Finished() {
		t.Fatal("peer found in a connection that sent no exchange")
	}
	if st.InitialHeaderNotFound.Value() != 1 {
		t.Fatalf("initial_header_not_found %d", st.InitialHeaderNotFound.Value())
	}
}

func TestExchangeNeedsItsALPN(t *testing.T) {
	t.Parallel()
	c, _ := tlsPair(t, []string{"istio-http/1.1"}, []string{"istio-http/1.1"})
	st := NewMXStats(stats.NewStore())
	conn, x := (&MX{Protocol: "istio-peer-exchange"}).wrap(c, st, Local())
	if x != nil || conn != net.Conn(c) || st.ALPNNotFound.Value() != 1 {
		t.Fatal("exchange started without the istio-peer-exchange ALPN")
	}
}

func typedStruct(t *testing.T, typ string, v map[string]any) *anypb.Any {
	t.Helper()
	s, err := structpb.NewStruct(v)
	if err != nil {
		t.Fatal(err)
	}
	a, err := anypb.New(&udpav1.TypedStruct{TypeUrl: "type.googleapis.com/" + typ, Value: s})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCompileIstiodConfigs(t *testing.T) {
	t.Parallel()
	// As istiod's xdsfilters: TCPClusterMx, SidecarInboundMetadataFilter, SidecarOutboundMetadataFilter.
	mx, err := CompileMX(typedStruct(t, MXConfigType, map[string]any{"protocol": "istio-peer-exchange", "enable_discovery": true}), true)
	if err != nil || mx.Protocol != "istio-peer-exchange" || !mx.Upstream {
		t.Fatalf("mx: %+v %v", mx, err)
	}
	in, err := CompileHTTP(typedStruct(t, PeerMetadataConfigType, map[string]any{
		"downstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		"downstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	}))
	if err != nil || !in.DownstreamHeaders || !in.PropagateDownstream || in.UpstreamHeaders || in.PropagateUpstream {
		t.Fatalf("inbound: %+v %v", in, err)
	}
	out, err := CompileHTTP(typedStruct(t, PeerMetadataConfigType, map[string]any{
		"upstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{"skip_external_clusters": true}}},
	}))
	if err != nil || !out.UpstreamHeaders || !out.PropagateUpstream || !out.SkipExternal {
		t.Fatalf("outbound: %+v %v", out, err)
	}
	for _, tc := range []struct {
		name string
		a    *anypb.Any
		http bool
		want string
	}{
		{name: "unknown mx field", a: typedStruct(t, MXConfigType, map[string]any{"protocol": "p", "bogus": 1}), want: `unknown field "bogus"`},
		{name: "mx without protocol", a: typedStruct(t, MXConfigType, map[string]any{}), want: "protocol: required"},
		{name: "baggage", http: true, a: typedStruct(t, PeerMetadataConfigType, map[string]any{"downstream_discovery": []any{map[string]any{"baggage": map[string]any{}}}}), want: "downstream_discovery[0].baggage: not supported"},
		{name: "upstream filter state", http: true, a: typedStruct(t, PeerMetadataConfigType, map[string]any{"upstream_discovery": []any{map[string]any{"upstream_filter_state": map[string]any{"peer_metadata_key": "upstream_peer"}}}}), want: "upstream_discovery[0].upstream_filter_state: not supported"},
		{name: "baggage propagation", http: true, a: typedStruct(t, PeerMetadataConfigType, map[string]any{"downstream_propagation": []any{map[string]any{"baggage": map[string]any{}}}}), want: "downstream_propagation[0].baggage: not supported"},
		{name: "unknown http field", http: true, a: typedStruct(t, PeerMetadataConfigType, map[string]any{"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{"nope": true}}}}), want: `unknown field "nope"`},
	} {
		var err error
		if tc.http {
			_, err = CompileHTTP(tc.a)
		} else {
			_, err = CompileMX(tc.a, false)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}

func TestHTTPFilterExchangesHeaders(t *testing.T) {
	// SetLocal is process-wide: this test is not parallel.
	SetLocal(&corev3.Node{Id: "sidecar~10.0.0.2~reviews-1.default~default.svc.cluster.local", Metadata: node(t, "", "reviews-1", "default", "reviews", "v2").Metadata})
	t.Cleanup(func() { local.Store(nil) })
	client := node(t, "client-id", "productpage-1", "default", "productpage", "v1")
	inbound := &HTTPFilter{Downstream: []Method{MethodHeaders}, DownstreamHeaders: true, PropagateDownstream: true}
	req := http.Header{}
	req.Set(HeaderMetadata, client.Header)
	req.Set(HeaderMetadataID, client.ID)
	var st HTTPState
	inbound.OnRequest(req, &st, netip.Addr{})
	if st.Downstream == nil || st.Downstream.WorkloadName != "productpage-v1" {
		t.Fatalf("downstream peer %+v", st.Downstream)
	}
	if req.Get(HeaderMetadata) != "" || req.Get(HeaderMetadataID) != "" {
		t.Fatal("exchange headers reached the app")
	}
	resp := http.Header{}
	inbound.OnResponse(resp, &st, netip.Addr{})
	w, ok := ParseHeader(resp.Get(HeaderMetadata), nil)
	if !ok || w.WorkloadName != "reviews-v2" || resp.Get(HeaderMetadataID) != Local().ID {
		t.Fatalf("response metadata %+v %q", w, resp.Get(HeaderMetadataID))
	}
	// A request without the headers gets none back (istio-proxy answers only what it was sent).
	var bare HTTPState
	inbound.OnRequest(http.Header{}, &bare, netip.Addr{})
	resp = http.Header{}
	inbound.OnResponse(resp, &bare, netip.Addr{})
	if resp.Get(HeaderMetadata) != "" {
		t.Fatal("metadata added to the response of a request that sent none")
	}

	outbound := &HTTPFilter{Upstream: []Method{MethodHeaders}, UpstreamHeaders: true, PropagateUpstream: true, SkipExternal: true}
	up := http.Header{}
	outbound.InjectUpstream(up, "outbound|9080||reviews.default.svc.cluster.local", nil)
	if up.Get(HeaderMetadata) != Local().Header {
		t.Fatal("no metadata on an in-mesh upstream request")
	}
	for _, c := range []struct {
		cluster string
		meta    map[string]any
	}{{cluster: "PassthroughCluster"}, {cluster: "outbound|443||example.com", meta: map[string]any{"external": true}}, {cluster: "x", meta: map[string]any{"disable_mx": true}}} {
		h := http.Header{}
		md, _ := structpb.NewStruct(c.meta)
		outbound.InjectUpstream(h, c.cluster, md)
		if h.Get(HeaderMetadata) != "" {
			t.Errorf("metadata sent to %s %v", c.cluster, c.meta)
		}
	}
}

// TestSharedExchangeHeaders pins that the local node's exchange headers are set from
// values made once (no allocation per request) and that a later filter appending to
// one of them cannot change what the next request carries.
func TestSharedExchangeHeaders(t *testing.T) {
	SetLocal(&corev3.Node{Id: "sidecar~10.0.0.3~a.default~default.svc.cluster.local", Metadata: node(t, "", "a-1", "default", "a", "v1").Metadata})
	t.Cleanup(func() { local.Store(nil) })
	f := &HTTPFilter{PropagateUpstream: true, PropagateDownstream: true}
	h := http.Header{}
	allocs := testing.AllocsPerRun(100, func() {
		f.InjectUpstream(h, "outbound|80||a.default.svc.cluster.local", nil)
		f.OnResponse(h, &HTTPState{reqID: true, reqMeta: true}, netip.Addr{})
	})
	if allocs != 0 {
		t.Errorf("InjectUpstream and OnResponse allocate %v objects per request, want 0 (shared values)", allocs)
	}
	h.Add(HeaderMetadataID, "appended")
	h.Add(HeaderMetadata, "appended")
	next := http.Header{}
	f.InjectUpstream(next, "outbound|80||a.default.svc.cluster.local", nil)
	if got := next.Values(HeaderMetadataID); len(got) != 1 || got[0] != Local().ID {
		t.Errorf("next request's %s = %q, want only %q", HeaderMetadataID, got, Local().ID)
	}
	if got := next.Values(HeaderMetadata); len(got) != 1 || got[0] != Local().Header {
		t.Errorf("next request's %s = %d values, want only the local node's", HeaderMetadata, len(got))
	}
}

// TestCompileMXSharesOneFilterPerEncoding compiles a sidecar's clusters' one metadata
// exchange filter twice: the second is the first; the listener's filter of the same
// encoding is its own (it is not upstream), and a refused one stays refused.
func TestCompileMXSharesOneFilterPerEncoding(t *testing.T) {
	t.Parallel()
	a := typedStruct(t, MXConfigType, map[string]any{"protocol": "istio-peer-exchange", "additional_labels": []any{"cache-test"}})
	first, err := CompileMX(a, true)
	if err != nil {
		t.Fatal(err)
	}
	// The same encoding in another message, as each cluster of a response carries its
	// own copy (a second typedStruct could encode the Struct's map in another order).
	second, err := CompileMX(proto.Clone(a).(*anypb.Any), true)
	if err != nil || second != first {
		t.Errorf("second compilation: %p %v, want the first (%p)", second, err, first)
	}
	down, err := CompileMX(a, false)
	if err != nil || down.Upstream || !first.Upstream || !reflect.DeepEqual(down.Labels, []string{"cache-test"}) {
		t.Errorf("listener filter: %+v %v; cluster filter %+v", down, err, first)
	}
	bad := typedStruct(t, MXConfigType, map[string]any{"protocol": "p", "cache-bogus": 1})
	for range 2 {
		if _, err := CompileMX(bad, true); err == nil {
			t.Error("unknown field accepted")
		}
	}
}

// TestWaypointPeerDiscovery pins the waypoint's peer_metadata filters as istiod sends
// them: connect_terminate's downstream workload_discovery (shared with upstream) finds
// the client by its address in the WDS index, main_internal's upstream one finds the
// destination by the address its connect_originate endpoint names; an address the index
// does not hold finds nobody.
func TestWaypointPeerDiscovery(t *testing.T) {
	// SetWorkloads is process-wide: this test is not parallel.
	SetWorkloads(NewWorkloads([]*workload.Workload{
		{Name: "curl-5b549b49b8-x", Namespace: "default", ServiceAccount: "curl", WorkloadName: "curl", CanonicalName: "curl",
			CanonicalRevision: "latest", ClusterId: "Kubernetes", Addresses: [][]byte{netip.MustParseAddr("10.10.0.2").AsSlice()}},
		{Name: "httpbin-1", Namespace: "", WorkloadName: "httpbin", CanonicalName: "httpbin", CanonicalRevision: "v1",
			TrustDomain: "example.org", Addresses: [][]byte{netip.MustParseAddr("10.10.0.3").AsSlice()}},
	}))
	t.Cleanup(func() { SetWorkloads(nil) })
	down, err := CompileHTTP(typedStruct(t, PeerMetadataConfigType, map[string]any{
		"downstream_discovery": []any{map[string]any{"workload_discovery": map[string]any{}}}, "shared_with_upstream": true}))
	if err != nil {
		t.Fatal(err)
	}
	up, err := CompileHTTP(typedStruct(t, PeerMetadataConfigType, map[string]any{
		"upstream_discovery": []any{map[string]any{"workload_discovery": map[string]any{}}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !down.SharedWithUpstream || up.SharedWithUpstream {
		t.Fatal("shared_with_upstream not compiled")
	}
	var st HTTPState
	down.OnRequest(http.Header{}, &st, netip.MustParseAddr("10.10.0.2"))
	c := st.Downstream
	if c == nil || c.WorkloadName != "curl" || c.App != "curl" || c.Version != "latest" || c.Cluster != "Kubernetes" ||
		c.Identity != "spiffe://cluster.local/ns/default/sa/curl" || st.DownstreamRaw == "" {
		t.Fatalf("downstream peer %+v (raw %q)", c, st.DownstreamRaw)
	}
	up.OnResponse(http.Header{}, &st, netip.MustParseAddr("::ffff:10.10.0.3"))
	if d := st.Upstream; d == nil || d.Namespace != "default" || d.Identity != "spiffe://example.org/ns/default/sa/default" || d.CanonicalRevision != "v1" {
		t.Fatalf("upstream peer %+v", st.Upstream)
	}
	var none HTTPState
	down.OnRequest(http.Header{}, &none, netip.MustParseAddr("10.10.0.9"))
	if none.Downstream != nil {
		t.Fatalf("a peer found at an unknown address: %+v", none.Downstream)
	}

	fs := map[string]internalconn.Object{"io.istio.peer_principal": {Value: "spiffe://cluster.local/ns/default/sa/curl", Sharing: internalconn.SharedOnce}}
	shared := WithState(fs, KeyDownstreamPeer, c, st.DownstreamRaw, true)
	if len(fs) != 1 || FromState(shared, KeyDownstreamPeer) != c || shared[KeyDownstreamPeer].Sharing != internalconn.SharedOnce {
		t.Fatalf("filter state %+v", shared)
	}
	recv := internalconn.Received(shared)
	if FromState(recv, KeyDownstreamPeer) != c {
		t.Fatal("the downstream peer did not reach the internal connection")
	}
	if again := WithState(shared, KeyDownstreamPeer, &Workload{}, "", true); FromState(again, KeyDownstreamPeer) != c {
		t.Fatal("a second discovery replaced the first")
	}
}
