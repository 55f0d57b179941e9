package agent

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/internal/testutil"
)

// fixedPod is the pod of the bootstrap golden file.
func fixedPod() Config {
	return Config{
		Lab: "demo", Pod: "backend-v1", Namespace: "default", PodIP: netip.MustParseAddr("10.244.0.3"),
		NodeID:         "sidecar~10.244.0.3~backend-v1.default~default.svc.cluster.local",
		ServiceCluster: "backend.default", Workload: "backend-v1",
		Labels:         map[string]string{"app": "backend", "version": "v1"},
		ServiceAccount: "backend", RunDir: "/run/meshlab/demo/pods/backend-v1",
		XDSSocket: "/run/meshlab/demo/xds.sock", LabSocket: "/run/meshlab/demo/api.sock",
	}.withDefaults()
}

func TestBootstrapGolden(t *testing.T) {
	b, err := buildBootstrap(fixedPod())
	if err != nil {
		t.Fatal(err)
	}
	data, err := marshalBootstrap(b)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "bootstrap", data)
}

func TestBootstrapValidates(t *testing.T) {
	b, err := buildBootstrap(fixedPod())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	n := validateAnys(t, b.ProtoReflect())
	// admin access log, xds and sds-grpc http protocol options, and per listener an HCM
	// and a router.
	if n != 7 {
		t.Errorf("validated %d typed configs, want 7", n)
	}
}

// validateAnys unpacks every Any under m, validates it and recurses into it; it returns
// how many it found.
func validateAnys(t *testing.T, m protoreflect.Message) int {
	t.Helper()
	n := 0
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("unpack %s: %v", a.GetTypeUrl(), err)
		}
		if v, ok := inner.(interface{ ValidateAll() error }); !ok {
			t.Errorf("%s has no ValidateAll", a.GetTypeUrl())
		} else if err := v.ValidateAll(); err != nil {
			t.Errorf("validate %s: %v", a.GetTypeUrl(), err)
		}
		return 1 + validateAnys(t, inner.ProtoReflect())
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				n += validateAnys(t, mv.Message())
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				n += validateAnys(t, v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap() && !fd.IsList():
			n += validateAnys(t, v.Message())
		}
		return true
	})
	return n
}

func TestWriteBootstrap(t *testing.T) {
	c := fixedPod()
	c.RunDir = t.TempDir()
	path, err := writeBootstrap(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(c.RunDir, "envoy-rev3.json"); path != want {
		t.Errorf("path = %s, want %s", path, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644 (the proxy runs as 1337)", fi.Mode())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(data, &got); err != nil {
		t.Fatalf("parse written bootstrap: %v", err)
	}
	want, err := buildBootstrap(c)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, want) {
		t.Errorf("written bootstrap does not parse back to the built one")
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
}
