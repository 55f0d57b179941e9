package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshconfig "istio.io/api/mesh/v1alpha1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"istio.io/istio/pilot/pkg/config/kube/crd"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/mesh"
	kubelib "istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/controllers"
	"istio.io/istio/pkg/kube/kclient"
)

// maxStateBytes bounds one PUT /state: the lab's own limit on all its objects (32 MiB)
// plus room for the pods and EndpointSlices it derives.
const maxStateBytes = 64 << 20

// object is one object of the lab's state: its key, its text (to tell a change), and its
// decoded form, a Kubernetes object or an Istio config; an Istio object that istiod's
// ambient index reads has both (ambientKinds).
type object struct {
	key   string
	text  string
	kube  runtime.Object
	istio *config.Config
}

// state is the lab's objects by key.
type state map[string]object

// parseState reads multi-document YAML: Istio's and the Gateway API's kinds become configs
// of istiod's config store, the rest Kubernetes objects of its fake API server.
func parseState(data []byte) (state, error) {
	out := state{}
	decode := kubelib.IstioCodec.UniversalDeserializer().Decode
	for i, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if isConfig(doc) {
			cfgs, _, err := crd.ParseInputs(doc)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i+1, err)
			}
			for j := range cfgs {
				c := cfgs[j]
				key := c.GroupVersionKind.Kind + "/" + c.Namespace + "/" + c.Name
				o := object{key: key, text: doc, istio: &c}
				if features.EnableAmbient && ambientKinds[c.GroupVersionKind.Group+"/"+c.GroupVersionKind.Kind] && len(cfgs) == 1 {
					if o.kube, _, err = decode([]byte(doc), nil, nil); err != nil {
						return nil, fmt.Errorf("document %d: %w", i+1, err)
					}
				}
				out[key] = o
			}
			continue
		}
		o, gvk, err := decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		m, err := metaOf(o)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		key := gvk.Kind + "/" + m.GetNamespace() + "/" + m.GetName()
		out[key] = object{key: key, text: doc, kube: o}
	}
	return out, nil
}

// ambientKinds are the kinds (group/kind) istiod's ambient index reads from the
// Kubernetes API (its informers), where its generators read the config store: with
// ambient on (PILOT_ENABLE_AMBIENT=true in meshlab-istiod's environment, as an ambient
// install sets it), the feed writes them to both, as a cluster's API server serves both.
// The waypoints' Gateways and their GatewayClass are among them.
var ambientKinds = map[string]bool{
	"security.istio.io/AuthorizationPolicy": true, "security.istio.io/PeerAuthentication": true,
	"networking.istio.io/ServiceEntry":  true,
	"gateway.networking.k8s.io/Gateway": true, "gateway.networking.k8s.io/GatewayClass": true,
}

// isConfig reports whether a document is one istiod reads from its config store.
func isConfig(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if v, ok := strings.CutPrefix(l, "apiVersion:"); ok {
			v = strings.TrimSpace(v)
			return strings.Contains(v, "istio.io/") || strings.HasPrefix(v, "gateway.networking.k8s.io/")
		}
	}
	return false
}

func metaOf(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", o)
	}
	return m, nil
}

func (s state) kubeObjects() []runtime.Object {
	var out []runtime.Object
	for _, o := range s {
		if o.kube != nil {
			out = append(out, o.kube)
		}
	}
	return out
}

func (s state) istioConfigs() []config.Config {
	var out []config.Config
	for _, o := range s {
		if o.istio != nil {
			out = append(out, *o.istio)
		}
	}
	return out
}

// feed keeps istiod's inputs equal to the lab's objects.
type feed struct {
	fake *xds.FakeDiscoveryServer
	mu   sync.Mutex
	cur  state
}

func newFeed(fake *xds.FakeDiscoveryServer, initial state) *feed {
	if initial == nil {
		initial = state{}
	}
	return &feed{fake: fake, cur: initial}
}

func (f *feed) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /state", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxStateBytes+1))
		if err != nil || len(b) > maxStateBytes {
			http.Error(w, fmt.Sprintf("read state: %v (at most %d bytes)", err, maxStateBytes), http.StatusBadRequest)
			return
		}
		next, err := parseState(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		n, err := f.set(r.Context(), next)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintf(w, "%d changes\n", n)
	})
	mux.HandleFunc("PUT /mesh", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := f.setMesh(string(b)); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintln(w, "mesh config set")
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, istioVersion()) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/debug/", f.fake.DiscoveryDebug)
	return mux
}

// meshKey is the istio ConfigMap of istio-system: its key mesh is the mesh config
// istiod's mesh watcher reads.
const meshKey = "ConfigMap/istio-system/istio"

// setMesh replaces istiod's mesh config with text (YAML over Istio's defaults), as a
// change of the istio ConfigMap reaches istiod's mesh watcher, and pushes every proxy in
// full, as istiod's mesh handler does.
func (f *feed) setMesh(text string) error {
	mc, err := mesh.ApplyMeshConfigDefaults(text)
	if err != nil {
		return fmt.Errorf("mesh config: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.setMeshLocked(mc)
}

func (f *feed) setMeshLocked(mc *meshconfig.MeshConfig) error {
	w, ok := f.fake.Discovery.Env.Watcher.(interface{ Set(*meshconfig.MeshConfig) })
	if !ok {
		return fmt.Errorf("istiod's mesh watcher (%T) cannot be set", f.fake.Discovery.Env.Watcher)
	}
	w.Set(mc)
	f.fake.Discovery.ConfigUpdate(&model.PushRequest{Forced: true, Reason: model.NewReasonStats(model.GlobalUpdate)})
	return nil
}

// changedMesh returns the mesh config of next's istio ConfigMap when it differs from
// the current one's (nil when it does not, or next holds none), refusing one istiod
// would not read.
func (f *feed) changedMesh(next state) (*meshconfig.MeshConfig, error) {
	o, ok := next[meshKey]
	if !ok || f.cur[meshKey].text == o.text {
		return nil, nil
	}
	cm, ok := o.kube.(*corev1.ConfigMap)
	if !ok {
		return nil, nil
	}
	mc, err := mesh.ApplyMeshConfigDefaults(cm.Data["mesh"])
	if err != nil {
		return nil, fmt.Errorf("%s: data.mesh: %w", meshKey, err)
	}
	return mc, nil
}

// set makes istiod's inputs next: a changed mesh config first (the istio ConfigMap, set
// on istiod's mesh watcher), then deletes (what is gone), then creates and updates, each
// one a watch event or a config store event, as a cluster's would be. It returns how many
// objects changed. A mesh config istiod would not read refuses the whole set.
func (f *feed) set(ctx context.Context, next state) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mc, err := f.changedMesh(next)
	if err != nil {
		return 0, err
	}
	if mc != nil {
		if err := f.setMeshLocked(mc); err != nil {
			return 0, err
		}
	}
	kc := f.fake.KubeClient()
	store := f.fake.Store()
	n := 0
	var errs []string
	for key, o := range f.cur {
		if _, ok := next[key]; ok {
			continue
		}
		n++
		var err error
		if o.istio != nil {
			err = store.Delete(o.istio.GroupVersionKind, o.istio.Name, o.istio.Namespace, nil)
		}
		if o.kube != nil && err == nil {
			err = deleteKube(ctx, kc, o.kube)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("delete %s: %v", key, err))
		}
	}
	for key, o := range next {
		prev, had := f.cur[key]
		if had && prev.text == o.text {
			continue
		}
		n++
		var err error
		switch {
		case o.istio != nil && had:
			_, err = store.Update(*o.istio)
		case o.istio != nil:
			_, err = store.Create(*o.istio)
		}
		if o.kube != nil && err == nil {
			err = applyKube(ctx, kc, o.kube, had)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("apply %s: %v", key, err))
		}
	}
	f.cur = next
	if len(errs) > 0 {
		log.Printf("feed: %s", strings.Join(errs, "; "))
		return n, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return n, nil
}

// applyKube creates or updates a Kubernetes object in the fake API server.
func applyKube(ctx context.Context, client kubelib.Client, o runtime.Object, update bool) error {
	c := client.Kube()
	var err error
	switch x := o.(type) {
	case *corev1.Node:
		err = upsert(ctx, update, x, c.CoreV1().Nodes().Create, c.CoreV1().Nodes().Update)
	case *corev1.Namespace:
		err = upsert(ctx, update, x, c.CoreV1().Namespaces().Create, c.CoreV1().Namespaces().Update)
	case *corev1.Service:
		err = upsert(ctx, update, x, c.CoreV1().Services(x.Namespace).Create, c.CoreV1().Services(x.Namespace).Update)
	case *corev1.Pod:
		err = upsert(ctx, update, x, c.CoreV1().Pods(x.Namespace).Create, c.CoreV1().Pods(x.Namespace).Update)
	case *corev1.ServiceAccount:
		err = upsert(ctx, update, x, c.CoreV1().ServiceAccounts(x.Namespace).Create, c.CoreV1().ServiceAccounts(x.Namespace).Update)
	case *corev1.Secret:
		err = upsert(ctx, update, x, c.CoreV1().Secrets(x.Namespace).Create, c.CoreV1().Secrets(x.Namespace).Update)
	case *corev1.ConfigMap:
		err = upsert(ctx, update, x, c.CoreV1().ConfigMaps(x.Namespace).Create, c.CoreV1().ConfigMaps(x.Namespace).Update)
	case *discoveryv1.EndpointSlice:
		err = upsert(ctx, update, x, c.DiscoveryV1().EndpointSlices(x.Namespace).Create, c.DiscoveryV1().EndpointSlices(x.Namespace).Update)
	case *securityv1.AuthorizationPolicy:
		err = upsertCRD(ctx, client, update, x)
	case *securityv1.PeerAuthentication:
		err = upsertCRD(ctx, client, update, x)
	case *networkingv1.ServiceEntry:
		err = upsertCRD(ctx, client, update, x)
	case *gatewayv1.Gateway:
		err = upsertCRD(ctx, client, update, x)
	case *gatewayv1.GatewayClass:
		err = upsertCRD(ctx, client, update, x)
	default:
		return fmt.Errorf("kind %T is not fed to istiod", o)
	}
	return err
}

// upsertCRD creates or updates an Istio object in the fake API server (ambientKinds).
func upsertCRD[T controllers.ComparableObject](ctx context.Context, c kubelib.Client, update bool, obj T) error {
	w := kclient.NewWriteClient[T](c)
	return upsert(ctx, update, obj,
		func(_ context.Context, o T, _ metav1.CreateOptions) (T, error) { return w.Create(o) },
		func(_ context.Context, o T, _ metav1.UpdateOptions) (T, error) { return w.Update(o) })
}

// upsert creates or updates obj; an update of what is missing creates it, a create of
// what exists updates it.
func upsert[T any](ctx context.Context, update bool, obj T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	upd func(context.Context, T, metav1.UpdateOptions) (T, error),
) error {
	if update {
		_, err := upd(ctx, obj, metav1.UpdateOptions{})
		if kerrors.IsNotFound(err) {
			_, err = create(ctx, obj, metav1.CreateOptions{})
		}
		return err
	}
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if kerrors.IsAlreadyExists(err) {
		_, err = upd(ctx, obj, metav1.UpdateOptions{})
	}
	return err
}

// deleteKube deletes a Kubernetes object from the fake API server.
func deleteKube(ctx context.Context, client kubelib.Client, o runtime.Object) error {
	c := client.Kube()
	m, err := metaOf(o)
	if err != nil {
		return err
	}
	ns, name, opts := m.GetNamespace(), m.GetName(), metav1.DeleteOptions{}
	switch o.(type) {
	case *corev1.Node:
		err = c.CoreV1().Nodes().Delete(ctx, name, opts)
	case *corev1.Namespace:
		err = c.CoreV1().Namespaces().Delete(ctx, name, opts)
	case *corev1.Service:
		err = c.CoreV1().Services(ns).Delete(ctx, name, opts)
	case *corev1.Pod:
		err = c.CoreV1().Pods(ns).Delete(ctx, name, opts)
	case *corev1.ServiceAccount:
		err = c.CoreV1().ServiceAccounts(ns).Delete(ctx, name, opts)
	case *corev1.Secret:
		err = c.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	case *corev1.ConfigMap:
		err = c.CoreV1().ConfigMaps(ns).Delete(ctx, name, opts)
	case *discoveryv1.EndpointSlice:
		err = c.DiscoveryV1().EndpointSlices(ns).Delete(ctx, name, opts)
	case *securityv1.AuthorizationPolicy:
		err = kclient.NewWriteClient[*securityv1.AuthorizationPolicy](client).Delete(name, ns)
	case *securityv1.PeerAuthentication:
		err = kclient.NewWriteClient[*securityv1.PeerAuthentication](client).Delete(name, ns)
	case *networkingv1.ServiceEntry:
		err = kclient.NewWriteClient[*networkingv1.ServiceEntry](client).Delete(name, ns)
	case *gatewayv1.Gateway:
		err = kclient.NewWriteClient[*gatewayv1.Gateway](client).Delete(name, ns)
	case *gatewayv1.GatewayClass:
		err = kclient.NewWriteClient[*gatewayv1.GatewayClass](client).Delete(name, ns)
	default:
		return fmt.Errorf("kind %T is not fed to istiod", o)
	}
	if kerrors.IsNotFound(err) {
		return nil
	}
	return err
}
