package kubeedit

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"testing"
)

// detailsService is Bookinfo's details Service as bookinfo.yaml writes it.
const detailsService = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"details","labels":{"app":"details","service":"details"}},"spec":{"ports":[{"port":9080,"name":"http"}],"selector":{"app":"details"}}}`

// httpbinDeployment is samples/httpbin/httpbin.yaml's Deployment, shortened.
const httpbinDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"httpbin"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"httpbin","version":"v1"}},"template":{"metadata":{"labels":{"app":"httpbin","version":"v1"}},"spec":{"serviceAccountName":"httpbin","containers":[{"image":"docker.io/mccutchen/go-httpbin:v2.15.0","imagePullPolicy":"IfNotPresent","name":"httpbin","ports":[{"containerPort":8080}]},{"name":"istio-proxy","image":"auto","env":[{"name":"A","value":"1"}]}]}}}}`

// gatewayAPIGateway is a Gateway API Gateway, a CRD's object.
const gatewayAPIGateway = `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","metadata":{"name":"istio-ingressgateway","namespace":"istio-system"},"spec":{"gatewayClassName":"istio","listeners":[{"name":"http","port":80,"protocol":"HTTP"}]}}`

func jsonAt(t *testing.T, doc []byte, path ...any) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("patched object is not JSON: %v\n%s", err, doc)
	}
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestApply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		object   string
		patch    string // as the user writes it: YAML or JSON
		typ      string
		changed  bool
		path     []any // where to look in the patched object
		want     any
		wantErr  string // the error as kubectl prints it
		wantLen  []any  // a list whose length to check
		wantSize int
	}{
		{
			name: "json replace (kiali)", object: detailsService, typ: "json",
			patch:   `[{"op":"replace","path":"/spec/ports/0/name", "value":"foo"}]`,
			changed: true, path: []any{"spec", "ports", 0, "name"}, want: "foo",
		},
		{
			name: "json replace with the value it has", object: detailsService, typ: "json",
			patch:   `[{"op":"replace","path":"/spec/ports/0/name", "value":"http"}]`,
			changed: false, path: []any{"spec", "ports", 0, "port"}, want: float64(9080),
		},
		{
			name: "json replace of a missing path", object: detailsService, typ: "json",
			patch:   `[{"op":"replace","path":"/spec/ports/3/name", "value":"foo"}]`,
			wantErr: "The request is invalid: the server rejected our request due to an error in our request",
		},
		{
			name: "json patch that is not a list", object: detailsService, typ: "json",
			patch:   `{"spec":{"type":"NodePort"}}`,
			wantErr: "Error from server (BadRequest): json: cannot unmarshal object into Go value of type jsonpatch.Patch",
		},
		{
			name: "json add and remove", object: detailsService, typ: "json",
			patch:   `[{"op":"add","path":"/metadata/labels/tier","value":"back"},{"op":"remove","path":"/metadata/labels/service"}]`,
			changed: true, path: []any{"metadata", "labels"}, want: map[string]any{"app": "details", "tier": "back"},
		},
		{
			name: "strategic by default (authz-ingress)", object: detailsService, typ: "",
			patch:   `{"spec":{"externalTrafficPolicy":"Local"}}`,
			changed: true, path: []any{"spec", "externalTrafficPolicy"}, want: "Local",
		},
		{
			name: "strategic merges ports by port", object: detailsService, typ: "strategic",
			patch:   `{"spec":{"ports":[{"port":9080,"name":"tcp"}]}}`,
			changed: true, path: []any{"spec", "ports", 0, "name"}, want: "tcp",
			wantLen: []any{"spec", "ports"}, wantSize: 1,
		},
		{
			name: "merge replaces lists whole", object: detailsService, typ: "merge",
			patch:   `{"spec":{"ports":[{"port":80,"name":"http"}]}}`,
			changed: true, path: []any{"spec", "ports", 0, "port"}, want: float64(80),
			wantLen: []any{"spec", "ports"}, wantSize: 1,
		},
		{
			name: "merge with null removes", object: detailsService, typ: "merge",
			patch:   `{"metadata":{"labels":{"service":null}}}`,
			changed: true, path: []any{"metadata", "labels"}, want: map[string]any{"app": "details"},
		},
		{
			name: "merge that changes nothing", object: detailsService, typ: "merge",
			patch: `{"spec":{"selector":{"app":"details"}}}`, changed: false,
			path: []any{"spec", "selector", "app"}, want: "details",
		},
		{
			name: "merge patch file as YAML (secure-metrics)", object: httpbinDeployment, typ: "merge",
			patch:   "spec:\n  template:\n    metadata:\n      annotations:\n        proxy.istio.io/config: |\n          proxyMetadata:\n            ENVOY_SECURE_METRICS_PORT: \"15091\"\n        prometheus.io/path: \"/stats/prometheus\"\n",
			changed: true, path: []any{"spec", "template", "metadata", "annotations", "prometheus.io/path"}, want: "/stats/prometheus",
		},
		{
			name: "strategic merges containers by name and env by name (secure-metrics gateway)", object: httpbinDeployment, typ: "strategic",
			patch:   "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        env:\n        - name: B\n          value: \"2\"\n",
			changed: true, path: []any{"spec", "template", "spec", "containers", 1, "env", 0, "value"}, want: "2", // the patch's items first, as the API server's
			wantLen: []any{"spec", "template", "spec", "containers"}, wantSize: 2,
		},
		{
			name: "strategic $patch delete of a container", object: httpbinDeployment, typ: "strategic",
			patch:   `{"spec":{"template":{"spec":{"containers":[{"name":"istio-proxy","$patch":"delete"}]}}}}`,
			changed: true, path: []any{"spec", "template", "spec", "containers", 0, "name"}, want: "httpbin",
			wantLen: []any{"spec", "template", "spec", "containers"}, wantSize: 1,
		},
		{
			name: "strategic on a CRD is the server's unsupported media type", object: gatewayAPIGateway, typ: "strategic",
			patch:   `{"spec":{"infrastructure":{"annotations":{"a":"b"}}}}`,
			wantErr: "Error from server (UnsupportedMediaType): " + unsupportedStrategic,
		},
		{
			name: "merge on a CRD", object: gatewayAPIGateway, typ: "merge",
			patch:   `{"spec":{"infrastructure":{"annotations":{"a":"b"}}}}`,
			changed: true, path: []any{"spec", "infrastructure", "annotations", "a"}, want: "b",
		},
		{
			name: "a patch may not rename the object", object: detailsService, typ: "merge",
			patch:   `{"metadata":{"name":"other"}}`,
			wantErr: "Error from server (BadRequest): the name of the object (other) does not match the name on the URL (details)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			typ, err := ParsePatchType(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			patch, err := ParsePatch([]byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			original := []byte(tc.object)
			keep := append([]byte(nil), original...)
			got, changed, err := Apply(original, patch, typ)
			if string(original) != string(keep) {
				t.Fatalf("Apply changed the original object:\n%s", original)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Apply: %v, want the error %q", err, tc.wantErr)
				}
				var se *StatusError
				if !errors.As(err, &se) {
					t.Fatalf("Apply: %T, want a *StatusError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v\n%s", changed, tc.changed, got)
			}
			if v := jsonAt(t, got, tc.path...); !reflect.DeepEqual(v, tc.want) {
				t.Errorf("%v = %#v, want %#v\n%s", tc.path, v, tc.want, got)
			}
			if tc.wantLen != nil {
				if l, _ := jsonAt(t, got, tc.wantLen...).([]any); len(l) != tc.wantSize {
					t.Errorf("%v has %d items, want %d\n%s", tc.wantLen, len(l), tc.wantSize, got)
				}
			}
		})
	}
}

func TestParsePatchType(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]PatchType{"": Strategic, "strategic": Strategic, "merge": Merge, "json": JSON, "JSON": JSON} {
		if got, err := ParsePatchType(in); err != nil || got != want {
			t.Errorf("ParsePatchType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParsePatchType("apply"); err == nil || err.Error() != `--type must be one of [json merge strategic], not "apply"` {
		t.Errorf("ParsePatchType(apply): %v, want kubectl's error", err)
	}
}

func TestParsePatch(t *testing.T) {
	t.Parallel()
	if _, err := ParsePatch([]byte("  \n")); err == nil || err.Error() != "must specify --patch or --patch-file containing the contents of the patch" {
		t.Errorf("empty patch: %v, want kubectl's error", err)
	}
	if _, err := ParsePatch([]byte("spec: [")); err == nil || !regexpMatch(`^unable to parse "spec: \[": `, err.Error()) {
		t.Errorf("bad patch: %v, want kubectl's unable to parse", err)
	}
	got, err := ParsePatch([]byte("spec:\n  type: NodePort\n"))
	if err != nil || string(got) != `{"spec":{"type":"NodePort"}}` {
		t.Errorf("YAML patch: %s, %v", got, err)
	}
}

// FuzzPatch holds the patch input's parsing and application to never panic, never
// change the original, and to return JSON whenever it succeeds.
func FuzzPatch(f *testing.F) {
	f.Add([]byte(`[{"op":"replace","path":"/spec/ports/0/name", "value":"foo"}]`), uint8(2))
	f.Add([]byte(`{"spec":{"externalTrafficPolicy":"Local"}}`), uint8(0))
	f.Add([]byte("spec:\n  template:\n    metadata:\n      annotations: {a: b}\n"), uint8(1))
	f.Add([]byte(`{"spec":{"ports":[{"port":9080,"$patch":"delete"}]}}`), uint8(0))
	f.Add([]byte(`[{"op":"move","from":"/spec","path":"/spec/x"}]`), uint8(2))
	f.Fuzz(func(t *testing.T, text []byte, typ uint8) {
		patch, err := ParsePatch(text)
		if err != nil {
			return
		}
		for _, obj := range []string{detailsService, httpbinDeployment} {
			original := []byte(obj)
			got, _, err := Apply(original, patch, PatchType(typ%3))
			if string(original) != obj {
				t.Fatalf("Apply changed the original")
			}
			if err == nil && !json.Valid(got) {
				t.Fatalf("Apply returned invalid JSON: %q", got)
			}
		}
	})
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
