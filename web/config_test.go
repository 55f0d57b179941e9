package web

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

// fakeConfig records what it is sent and fails on files named "bad.yaml".
type fakeConfig struct {
	applied []api.ConfigFile
	deleted []api.ObjectRef
}

func (f *fakeConfig) Apply(_ context.Context, files []api.ConfigFile) ([]api.Change, error) {
	for _, fl := range files {
		if fl.Name == "bad.yaml" {
			return nil, &api.ConfigError{Err: errors.New("bad.yaml: VirtualService default/x: spec.hosts: at least one host is required")}
		}
	}
	f.applied = append(f.applied, files...)
	return []api.Change{{Kind: "VirtualService", Namespace: "default", Name: "x", Action: api.ActionCreated}}, nil
}

func (f *fakeConfig) Delete(_ context.Context, _ []api.ConfigFile, refs []api.ObjectRef) ([]api.Change, error) {
	f.deleted = append(f.deleted, refs...)
	return []api.Change{{Kind: "VirtualService", Namespace: "default", Name: "x", Action: api.ActionDeleted}}, nil
}

func (f *fakeConfig) Objects(kind, _, _ string) ([]api.ConfigObject, error) {
	if kind == "gateway" {
		return nil, &api.ConfigError{Err: errors.New(`unknown kind "gateway"`)}
	}
	return []api.ConfigObject{{Kind: "VirtualService", Namespace: "default", Name: "x", File: "vs.yaml", Object: []byte(`{"kind":"VirtualService"}`)}}, nil
}

func (f *fakeConfig) Kinds() api.Kinds {
	return api.Kinds{{Kind: "VirtualService", Group: "networking.istio.io", Names: []string{"virtualservice", "virtualservices", "vs"}}}
}

func (f *fakeConfig) ProxyStatus() []api.ProxyStatus {
	return []api.ProxyStatus{{Pod: "backend-v1", Namespace: "default", Connected: true, Types: map[string]api.TypeStatus{"CDS": {Sent: "v2", Acked: "v2"}}}}
}

func TestConfigRoutesThroughClient(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeConfig{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, NewHandler(&fakeBackend{}, testutil.Logger(t), ConfigRoutes(f, f))) }()
	c := api.NewUnixClient(sock)
	t.Cleanup(func() {
		c.Close()
		cancel()
		<-done
	})
	changes, err := c.Apply(ctx, []api.ConfigFile{{Name: "vs.yaml", Data: "kind: VirtualService"}})
	if err != nil || len(changes) != 1 || changes[0].String() != "VirtualService default/x created" || f.applied[0].Data != "kind: VirtualService" {
		t.Errorf("Apply = %v, %v; applied %+v", changes, err, f.applied)
	}
	// The lab's message comes back as the error, unwrapped, so the CLI prints it as is;
	// its class (422) is ErrInvalid.
	if _, err := c.Apply(ctx, []api.ConfigFile{{Name: "bad.yaml"}}); !errors.Is(err, api.ErrInvalid) || err.Error() != "bad.yaml: VirtualService default/x: spec.hosts: at least one host is required" {
		t.Errorf("Apply of a bad file: err = %v", err)
	}
	if _, err := c.Apply(ctx, nil); err == nil || err.Error() != "no files to apply" {
		t.Errorf("Apply of nothing: err = %v", err)
	}
	if _, err := c.Delete(ctx, api.DeleteRequest{Refs: []api.ObjectRef{{Kind: "vs", Name: "x"}}}); err != nil || f.deleted[0].Name != "x" {
		t.Errorf("Delete: %v, %+v", err, f.deleted)
	}
	if ks, err := c.Kinds(ctx); err != nil || len(ks) != 1 || ks[0].Group != "networking.istio.io" {
		t.Errorf("Kinds = %+v, %v", ks, err)
	} else if k, ok := ks.Lookup("VS"); !ok || k.Kind != "VirtualService" {
		t.Errorf("Kinds.Lookup(VS) = %+v, %v", k, ok)
	}
	objs, err := c.Objects(ctx, "vs", "", "")
	if err != nil || len(objs) != 1 || string(objs[0].Object) != `{"kind":"VirtualService"}` {
		t.Errorf("Objects = %+v, %v", objs, err)
	}
	if _, err := c.Objects(ctx, "gateway", "", ""); !errors.Is(err, api.ErrInvalid) || err.Error() != `unknown kind "gateway"` {
		t.Errorf("Objects of an unknown kind: err = %v", err)
	}
	st, err := c.ProxyStatus(ctx)
	if err != nil || len(st) != 1 || st[0].Types["CDS"].State() != "SYNCED" {
		t.Errorf("ProxyStatus = %+v, %v", st, err)
	}
}

func TestTypeStatusState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ts   api.TypeStatus
		want string
	}{
		{api.TypeStatus{}, "NOT SENT"},
		{api.TypeStatus{Sent: "v3", Acked: "v3"}, "SYNCED"},
		{api.TypeStatus{Sent: "v3", Acked: "v2"}, "STALE"},
		{api.TypeStatus{Sent: "v3", Acked: "v2", NackError: "bad cluster"}, "NACK"},
		{api.TypeStatus{Sent: "v4", Acked: "v4", NackError: "old"}, "SYNCED"},
	}
	for _, tt := range tests {
		if got := tt.ts.State(); got != tt.want {
			t.Errorf("%+v.State() = %s, want %s", tt.ts, got, tt.want)
		}
	}
}
