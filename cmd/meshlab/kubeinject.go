package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// injectIstioVersion is the Istio release whose injection kube-inject writes (the proxy
// image's tag): the one meshlab's control plane is held to (docs/FIDELITY.md).
const injectIstioVersion = "1.31.0"

// injectedVolumeNames are the volumes Istio's injector adds to a pod, in its order.
var injectedVolumeNames = []string{"workload-socket", "credential-socket", "workload-certs", "istio-envoy", "istio-data", "istio-podinfo", "istio-token", "istiod-ca-cert"}

// newKubeInjectCmd is istioctl kube-inject -f FILE: the file's objects, each workload's
// pod template with Istio's sidecar as the injector adds it with the lab's values
// (istiod at istiod.istio-system.svc:15012, cluster Kubernetes, trust domain
// cluster.local, interception REDIRECT by istio-init). Applying the output to a lab gives
// the pods a sidecar whatever their namespace's label: the lab reads the injected
// containers as the injector's record and runs its own proxy in their place.
func newKubeInjectCmd() *cobra.Command {
	var files []string
	var output string
	cmd := &cobra.Command{
		Use:   "kube-inject -f FILE|- [-o FILE]",
		Short: "Print a workload file with Istio's sidecar injected, as istioctl kube-inject (apply it with meshlab apply -f)",
		Example: `  meshlab kube-inject -f samples/sleep/sleep.yaml | sudo meshlab apply -f -
  sudo meshlab apply -f <(meshlab kube-inject -f samples/sleep/sleep.yaml)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("filename not specified (-f)")
			}
			var out bytes.Buffer
			for _, f := range files {
				in := cmd.InOrStdin()
				if f != "-" {
					data, err := os.ReadFile(f)
					if err != nil {
						return err
					}
					in = bytes.NewReader(data)
				}
				if err := kubeInject(in, &out); err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
			}
			if output != "" {
				return os.WriteFile(output, out.Bytes(), 0o644)
			}
			_, err := cmd.OutOrStdout().Write(out.Bytes())
			return err
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "input Kubernetes resource filename, or - for stdin")
	cmd.Flags().StringVarP(&output, "output", "o", "", "modified output Kubernetes resource filename (default: stdout)")
	return cmd
}

// kubeInject writes each document of in to out followed by "---", as istioctl does:
// workloads re-encoded with the sidecar injected, others unchanged.
func kubeInject(in io.Reader, out io.Writer) error {
	r := yamlutil.NewYAMLReader(bufio.NewReader(in))
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		updated, err := injectDocument(raw)
		if err != nil {
			return err
		}
		if _, err := out.Write(updated); err != nil {
			return err
		}
		if _, err := io.WriteString(out, "---\n"); err != nil {
			return err
		}
	}
}

// injectDocument returns one document as kube-inject writes it.
func injectDocument(raw []byte) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return nil, err
	}
	// obj is decoded in place: top is its metadata, meta and spec its pods'.
	var obj any
	var top, meta *metav1.ObjectMeta
	var spec *corev1.PodSpec
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Pod":
		p := &corev1.Pod{}
		obj, top, meta, spec = p, &p.ObjectMeta, &p.ObjectMeta, &p.Spec
	case "apps/v1/Deployment":
		d := &appsv1.Deployment{}
		obj, top, meta, spec = d, &d.ObjectMeta, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec
	case "apps/v1/StatefulSet":
		d := &appsv1.StatefulSet{}
		obj, top, meta, spec = d, &d.ObjectMeta, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec
	case "apps/v1/DaemonSet":
		d := &appsv1.DaemonSet{}
		obj, top, meta, spec = d, &d.ObjectMeta, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec
	case "apps/v1/ReplicaSet":
		d := &appsv1.ReplicaSet{}
		obj, top, meta, spec = d, &d.ObjectMeta, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec
	default:
		// istioctl re-encodes the kinds it knows and leaves the others as they are;
		// meshlab leaves every object without a pod template as written (re-encoded, a
		// Service would gain targetPort: 0).
		return raw, nil
	}
	if err := yaml.UnmarshalStrict(raw, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	ns := firstOf(top.Namespace, "default")
	owner := "kubernetes://apis/v1/namespaces/" + ns + "/pods/" + top.Name
	if tm.Kind != "Pod" {
		owner = "kubernetes://apis/apps/v1/namespaces/" + ns + "/" + strings.ToLower(tm.Kind) + "s/" + top.Name
	}
	injectSidecar(meta, spec, top.Name, owner)
	return yaml.Marshal(obj)
}

// injectSidecar adds Istio's sidecar to a pod template as the injector's template does,
// unless the pod opts out (sidecar.istio.io/inject "false"), runs on the host's network or
// is injected already.
func injectSidecar(meta *metav1.ObjectMeta, spec *corev1.PodSpec, workload, owner string) {
	if meta.Labels[injectLabelKey] == "false" || meta.Annotations[injectLabelKey] == "false" || spec.HostNetwork {
		return
	}
	if _, done := meta.Annotations["sidecar.istio.io/status"]; done {
		return
	}
	var apps []string
	for _, c := range spec.Containers {
		if c.Name != "istio-proxy" {
			apps = append(apps, c.Name)
		}
	}
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	setDefault := func(m map[string]string, k, v string) {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	setDefault(meta.Labels, "security.istio.io/tlsMode", "istio")
	setDefault(meta.Labels, "service.istio.io/canonical-name", firstOf(meta.Labels["app.kubernetes.io/name"], meta.Labels["app"], workload))
	setDefault(meta.Labels, "service.istio.io/canonical-revision", firstOf(meta.Labels["app.kubernetes.io/version"], meta.Labels["version"], "latest"))
	meta.Annotations["istio.io/rev"] = "default"
	if len(apps) > 0 {
		setDefault(meta.Annotations, "kubectl.kubernetes.io/default-container", apps[0])
		setDefault(meta.Annotations, "kubectl.kubernetes.io/default-logs-container", apps[0])
	}
	meta.Annotations["prometheus.io/path"] = "/stats/prometheus"
	meta.Annotations["prometheus.io/port"] = "15020"
	meta.Annotations["prometheus.io/scrape"] = "true"
	status, _ := json.Marshal(map[string]any{
		"initContainers": []string{"istio-init"}, "containers": []string{"istio-proxy"},
		"volumes": injectedVolumeNames, "imagePullSecrets": nil, "revision": "default",
	})
	meta.Annotations["sidecar.istio.io/status"] = string(status)

	image := "docker.io/istio/proxyv2:" + injectIstioVersion
	spec.InitContainers = append(spec.InitContainers, istioInitContainer(image))
	spec.Containers = append(spec.Containers, injectedProxy(image, spec, apps, workload, owner))
	spec.Volumes = append(spec.Volumes, injectedVolumes()...)
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	spec.SecurityContext.FSGroup = ptrTo(int64(1337))
}

// injectLabelKey is the label (or annotation) by which a pod opts in or out of injection.
const injectLabelKey = "sidecar.istio.io/inject"

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func ptrTo[T any](v T) *T { return &v }

// proxyResources are the injector's default requests and limits for the proxy.
func proxyResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
}

// istioInitContainer is the init container that installs the sidecar's iptables redirect
// (in a lab, the node agent's netns setup does this).
func istioInitContainer(image string) corev1.Container {
	return corev1.Container{
		Name:  "istio-init",
		Image: image,
		Args: []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT",
			"-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info"},
		Resources: proxyResources(),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptrTo(false),
			Privileged:               ptrTo(false),
			Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptrTo(false),
			RunAsGroup:               ptrTo(int64(0)),
			RunAsNonRoot:             ptrTo(false),
			RunAsUser:                ptrTo(int64(0)),
		},
	}
}

// injectedProxy is the sidecar: pilot-agent and Envoy, with the environment the
// injector gives them.
func injectedProxy(image string, spec *corev1.PodSpec, apps []string, workload, owner string) corev1.Container {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	var ports []map[string]any
	for _, c := range spec.Containers {
		if !slices.Contains(apps, c.Name) {
			continue
		}
		for _, p := range c.Ports {
			port := map[string]any{"containerPort": p.ContainerPort}
			if p.Name != "" {
				port["name"] = p.Name
			}
			if p.Protocol != "" {
				port["protocol"] = string(p.Protocol)
			}
			ports = append(ports, port)
		}
	}
	podPorts := "[\n]"
	if len(ports) > 0 {
		b, _ := json.MarshalIndent(ports, "", "    ")
		podPorts = string(b)
	}
	return corev1.Container{
		Name:  "istio-proxy",
		Image: image,
		Ports: []corev1.ContainerPort{{ContainerPort: 15090, Protocol: corev1.ProtocolTCP, Name: "http-envoy-prom"}},
		Args: []string{"proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local",
			"--proxyLogLevel=warning", "--proxyComponentLogLevel=misc:error", "--log_output_level=default:info"},
		Env: []corev1.EnvVar{
			{Name: "PILOT_CERT_PROVIDER", Value: "istiod"},
			{Name: "CA_ADDR", Value: "istiod.istio-system.svc:15012"},
			field("POD_NAME", "metadata.name"),
			field("POD_NAMESPACE", "metadata.namespace"),
			field("INSTANCE_IP", "status.podIP"),
			field("SERVICE_ACCOUNT", "spec.serviceAccountName"),
			field("HOST_IP", "status.hostIP"),
			{Name: "ISTIO_CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "PROXY_CONFIG", Value: "{}\n"},
			{Name: "ISTIO_META_POD_PORTS", Value: podPorts},
			{Name: "ISTIO_META_APP_CONTAINERS", Value: strings.Join(apps, ",")},
			{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			{Name: "GOMAXPROCS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "ISTIO_META_CLUSTER_ID", Value: "Kubernetes"},
			field("ISTIO_META_NODE_NAME", "spec.nodeName"),
			{Name: "ISTIO_META_INTERCEPTION_MODE", Value: "REDIRECT"},
			{Name: "ISTIO_META_WORKLOAD_NAME", Value: workload},
			{Name: "ISTIO_META_OWNER", Value: owner},
			{Name: "ISTIO_META_MESH_ID", Value: "cluster.local"},
			{Name: "TRUST_DOMAIN", Value: "cluster.local"},
		},
		Resources: proxyResources(),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15021)}},
			FailureThreshold: 4, PeriodSeconds: 15, TimeoutSeconds: 3,
		},
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15021)}},
			FailureThreshold: 600, PeriodSeconds: 1, TimeoutSeconds: 3,
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptrTo(false),
			Privileged:               ptrTo(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptrTo(true),
			RunAsGroup:               ptrTo(int64(1337)),
			RunAsNonRoot:             ptrTo(true),
			RunAsUser:                ptrTo(int64(1337)),
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "workload-socket", MountPath: "/var/run/secrets/workload-spiffe-uds"},
			{Name: "credential-socket", MountPath: "/var/run/secrets/credential-uds"},
			{Name: "workload-certs", MountPath: "/var/run/secrets/workload-spiffe-credentials"},
			{Name: "istiod-ca-cert", MountPath: "/var/run/secrets/istio"},
			{Name: "istio-data", MountPath: "/var/lib/istio/data"},
			{Name: "istio-envoy", MountPath: "/etc/istio/proxy"},
			{Name: "istio-token", MountPath: "/var/run/secrets/tokens"},
			{Name: "istio-podinfo", MountPath: "/etc/istio/pod"},
		},
	}
}

// injectedVolumes are the volumes the sidecar mounts.
func injectedVolumes() []corev1.Volume {
	empty := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	return []corev1.Volume{
		empty("workload-socket"),
		empty("credential-socket"),
		empty("workload-certs"),
		{Name: "istio-envoy", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		empty("istio-data"),
		{Name: "istio-podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		}}}},
		{Name: "istio-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "istio-ca", ExpirationSeconds: ptrTo(int64(43200)), Path: "istio-token"}},
		}}}},
		{Name: "istiod-ca-cert", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "istio-ca-root-cert"}}}},
	}
}
