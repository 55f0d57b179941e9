package lab

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The fields the API server fills in when an object is stored without them, as
// Kubernetes' defaulting functions do (pkg/apis/core/v1/defaults.go and
// pkg/apis/apps/v1/defaults.go of k8s.io/kubernetes, which k8s.io/api does not ship),
// and its Service IP allocation's family fields: what `kubectl get -o yaml` shows of
// an object applied without them. The lab's view applies them to what it renders
// (kubeview.go); the store keeps objects as written.

// defaultService fills a Service's defaults: sessionAffinity None, the IPv4
// single-stack families of a lab's (IPv4) service range for a Service with a cluster
// IP (headless ones too), internalTrafficPolicy Cluster, externalTrafficPolicy Cluster
// for a LoadBalancer, and each port's protocol TCP and targetPort its port.
func defaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0 {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if s.Spec.ClusterIP == corev1.ClusterIPNone && len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
	}
	if len(s.Spec.IPFamilies) == 0 {
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	if s.Spec.IPFamilyPolicy == nil {
		single := corev1.IPFamilyPolicySingleStack
		s.Spec.IPFamilyPolicy = &single
	}
	if s.Spec.InternalTrafficPolicy == nil {
		cluster := corev1.ServiceInternalTrafficPolicyCluster
		s.Spec.InternalTrafficPolicy = &cluster
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == "" {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
}

// defaultDeployment fills a Deployment's defaults: one replica, the RollingUpdate
// strategy with 25% unavailable and 25% surge, 10 old ReplicaSets kept, a 600 s
// progress deadline, and its pod template's (defaultPodSpec).
func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		one := int32(1)
		d.Spec.Replicas = &one
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &quarter
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			d.Spec.Strategy.RollingUpdate.MaxSurge = &quarter
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		ten := int32(10)
		d.Spec.RevisionHistoryLimit = &ten
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		deadline := int32(600)
		d.Spec.ProgressDeadlineSeconds = &deadline
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

// defaultPodSpec fills a pod spec's defaults: restartPolicy Always, dnsPolicy
// ClusterFirst, a 30 s termination grace period, the default scheduler, an empty
// security context, and each container's (defaultContainer).
func defaultPodSpec(p *corev1.PodSpec) {
	if p.RestartPolicy == "" {
		p.RestartPolicy = corev1.RestartPolicyAlways
	}
	if p.DNSPolicy == "" {
		p.DNSPolicy = corev1.DNSClusterFirst
	}
	if p.TerminationGracePeriodSeconds == nil {
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		p.TerminationGracePeriodSeconds = &grace
	}
	if p.SchedulerName == "" {
		p.SchedulerName = corev1.DefaultSchedulerName
	}
	if p.SecurityContext == nil {
		p.SecurityContext = &corev1.PodSecurityContext{}
	}
	if p.ServiceAccountName != "" && p.DeprecatedServiceAccount == "" {
		p.DeprecatedServiceAccount = p.ServiceAccountName // the API server mirrors it
	}
	for i := range p.InitContainers {
		defaultContainer(&p.InitContainers[i])
	}
	for i := range p.Containers {
		defaultContainer(&p.Containers[i])
	}
}

// defaultContainer fills a container's defaults: the image pull policy (Always for an
// image without a tag or tagged latest, else IfNotPresent), the termination message's
// path and policy, each port's protocol TCP, and its probes' (defaultProbe).
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if tag := imageTag(c.Image); tag == "" || tag == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
}

// defaultProbe fills a probe's defaults: 1 s timeout, every 10 s, 1 success, 3
// failures, an HTTP GET's scheme HTTP.
func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil && p.HTTPGet.Scheme == "" {
		p.HTTPGet.Scheme = corev1.URISchemeHTTP
	}
}

// imageTag returns an image reference's tag, "" when it has none (a digest counts as
// one).
func imageTag(image string) string {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		return digest
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok {
		return tag
	}
	return ""
}

// The API server's node port range (kube-apiserver --service-node-port-range default).
const nodePortBase, nodePortCount = 30000, 2768

// allocateNodePorts gives every port of the NodePort and LoadBalancer Services (those
// whose allocateLoadBalancerNodePorts is not false) a node port, as the API server's
// allocator does at creation, and LoadBalancer ones allocateLoadBalancerNodePorts true,
// its default. A written nodePort is kept and taken. The lab allocates at each render,
// so a port is drawn from the Service's uid, its port and protocol (kept by every
// replace: an apply that names no nodePort keeps it, as kubectl apply's merge keeps the
// allocated one), and a port taken already goes to the next free one, Services in the
// order of their creation (then namespace and name): a Service made later never moves
// an earlier one's. uid returns a Service's.
func allocateNodePorts(svcs []corev1.Service, uid func(*corev1.Service) string) {
	taken := map[int32]bool{}
	var want []int
	for i := range svcs {
		s := &svcs[i]
		switch s.Spec.Type {
		case corev1.ServiceTypeLoadBalancer:
			if s.Spec.AllocateLoadBalancerNodePorts == nil {
				yes := true
				s.Spec.AllocateLoadBalancerNodePorts = &yes
			}
			if !*s.Spec.AllocateLoadBalancerNodePorts {
				continue
			}
		case corev1.ServiceTypeNodePort:
		default:
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				taken[p.NodePort] = true
			}
		}
		want = append(want, i)
	}
	slices.SortStableFunc(want, func(a, b int) int {
		x, y := &svcs[a], &svcs[b]
		return cmp.Or(x.CreationTimestamp.Compare(y.CreationTimestamp.Time), cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	for _, i := range want {
		s := &svcs[i]
		id := uid(s)
		for j := range s.Spec.Ports {
			p := &s.Spec.Ports[j]
			if p.NodePort != 0 {
				continue
			}
			h := fnv.New32a()
			fmt.Fprintf(h, "%s/%d/%s", id, p.Port, p.Protocol)
			off := int32(h.Sum32() % nodePortCount)
			for n := int32(0); n < nodePortCount; n++ {
				if np := nodePortBase + (off+n)%nodePortCount; !taken[np] {
					p.NodePort, taken[np] = np, true
					break
				}
			}
		}
	}
}
