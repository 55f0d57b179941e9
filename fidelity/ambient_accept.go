package fidelity

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
	"github.com/meshlab/meshlab/dataplane/ztunnel/xdsclient"
)

// ztunnelAccepts connects meshlab's ztunnel WDS client (dataplane/ztunnel/xdsclient, the
// client `meshlab ztunnel` runs, ACKing and NACKing) to istiod, applying what it
// receives to ztunnel's state (dataplane/ztunnel/state) as `meshlab ztunnel` does, and
// returns one verdict per resource istiod sent: accepted when the client applied it and
// the state holds it unchanged, else refused with the NACK's reason or what the state
// holds instead. It also says how the verdicts were reached.
func ztunnelAccepts(ctx context.Context, t *testing.T, addr string, sent map[string]map[string]proto.Message) ([]verdict, string) {
	t.Helper()
	node, err := ztunnelNode()
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("fidelity"), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial istiod: %v", err)
	}
	defer conn.Close()
	h := &recordingHandler{store: state.New(ambientNode), nacks: map[string]string{}}
	c := xdsclient.New(xdsclient.Options{
		Conn: conn, Node: node, TokenFile: token, Handler: h,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Synced():
	case <-ctx.Done():
		t.Fatalf("meshlab's ztunnel client did not sync with istiod: %v (NACKs: %v)", ctx.Err(), h.nackList())
	}
	// What istiod sends after the first response of each type (it sent everything in
	// those) would be applied within the settle time collectWDS also waited.
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	return h.judge(sent), "meshlab's xdsclient + state"
}

// recordingHandler applies WDS deltas to ztunnel's state as `meshlab ztunnel` does
// (xdsclient.ApplyTo, the decoder `meshlab ztunnel` applies with), recording what it
// refused by resource name.
type recordingHandler struct {
	store *state.Store
	mu    sync.Mutex
	nacks map[string]string // "<type> <name>" or "<type>" -> reason
}

func (h *recordingHandler) Apply(typeURL string, resources []*discoveryv3.Resource, removed []string) error {
	err := xdsclient.ApplyTo(h.store, typeURL, resources, removed)
	if err != nil {
		h.mu.Lock()
		for _, r := range resources {
			h.nacks[typeURL+" "+r.GetName()] = err.Error()
		}
		h.mu.Unlock()
	}
	return err
}

func (h *recordingHandler) nackList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.nacks))
	for k, v := range h.nacks {
		out = append(out, k+": "+v)
	}
	sort.Strings(out)
	return out
}

// held returns what ztunnel's state holds, as Istio's types by WDS name.
func (h *recordingHandler) held() (map[string]map[string]proto.Message, error) {
	out := map[string]map[string]proto.Message{addressType: {}, authorizationType: {}}
	add := func(typ string, m proto.Message) error {
		im, err := asIstio(m)
		if err != nil {
			return err
		}
		out[typ][wdsName(im)] = im
		return nil
	}
	for _, w := range h.store.Workloads() {
		if err := add(addressType, &workload.Address{Type: &workload.Address_Workload{Workload: w.Workload}}); err != nil {
			return nil, err
		}
	}
	for _, s := range h.store.Services() {
		if err := add(addressType, &workload.Address{Type: &workload.Address_Service{Service: s.Service}}); err != nil {
			return nil, err
		}
	}
	for _, p := range h.store.Policies() {
		if err := add(authorizationType, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// judge gives every resource istiod sent its verdict.
func (h *recordingHandler) judge(sent map[string]map[string]proto.Message) []verdict {
	held, err := h.held()
	var out []verdict
	for _, typ := range ambientTypes {
		names := make([]string, 0, len(sent[typ]))
		for n := range sent[typ] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v := verdict{Type: shortNames[typ], Name: n}
			h.mu.Lock()
			nack, nacked := h.nacks[typ+" "+n]
			h.mu.Unlock()
			switch {
			case nacked:
				v.Reason = nack
			case err != nil:
				v.Reason = "read ztunnel's state: " + err.Error()
			case held[typ][n] == nil:
				v.Reason = "acked, but ztunnel's state does not hold it"
			case !proto.Equal(held[typ][n], sent[typ][n]):
				v.Reason = "ztunnel's state holds it changed"
			default:
				v.Accepted = true
			}
			out = append(out, v)
		}
	}
	return out
}
