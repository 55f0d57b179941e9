package runner

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab"
)

// xdsTypes are the types proxy-synced and nack may name.
var xdsTypes = []string{"CDS", "LDS", "EDS", "RDS", "SDS"}

// statOps are the comparisons of a stat check.
var statOps = []string{">", ">=", "==", "<", "<=", "!="}

// validate checks every step against the lab's scenario: pods, services, versions.
func validate(l *Lab, errs *ErrorList) {
	p := problems{file: l.File, list: errs}
	sc, err := config.Load(l.ScenarioFile, l.ScenarioData)
	if err != nil {
		p.addf("spec.scenario", "the lab's scenario is not valid: %v", err)
		return
	}
	m, err := sc.Build(config.BuildOptions{PodCIDR: lab.DefaultPodCIDR, ServiceCIDR: lab.DefaultServiceCIDR})
	if err != nil {
		p.addf("spec.scenario", "the lab's scenario is not valid: %v", err)
		return
	}
	l.versions, l.hosts, l.workloads = map[string]string{}, map[string][]string{}, map[string]string{}
	for _, pod := range m.Pods {
		l.versions[pod.Name] = pod.Labels["version"]
		l.workloads[pod.Name] = pod.Workload
		for _, svc := range m.ServicesFor(pod) {
			l.hosts[pod.Name] = append(l.hosts[pod.Name], svc.Hostname())
		}
	}
	v := &validator{m: m, scenario: l.ScenarioData, applied: map[string][]byte{}}
	for i := range l.Steps {
		st := &l.Steps[i]
		v.p = problems{file: l.File, step: i + 1, name: st.Name, list: errs}
		path := fmt.Sprintf("spec.steps[%d]", i)
		for j, a := range st.Actions {
			v.action(a, fmt.Sprintf("%s.actions[%d].%s", path, j, a.Kind))
		}
		for j, a := range st.Solution {
			ap := fmt.Sprintf("%s.solution[%d].%s", path, j, a.Kind)
			if a.Load != nil {
				v.p.addf(ap, "a solution is what the attendee runs; a background load belongs in the step's actions")
			}
			v.action(a, ap)
		}
		for j, a := range st.Verify {
			ap := fmt.Sprintf("%s.verify[%d].%s", path, j, a.Kind)
			if a.Traffic == nil && a.Wait == nil {
				v.p.addf(ap, "verify runs before every check: traffic and wait only, got %s", a.Kind)
			}
			v.action(a, ap)
		}
		for j, c := range st.Checks {
			v.check(c, fmt.Sprintf("%s.checks[%d].%s", path, j, c.Kind))
		}
	}
}

type validator struct {
	m        *model.Model
	scenario []byte
	// applied holds what earlier steps applied, by kind/namespace/name, in order.
	applied map[string][]byte
	order   []string
	p       problems
}

// objectKey names a YAML document's object ("" when it has none).
func objectKey(doc []byte) string {
	var h struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if yaml.Unmarshal(doc, &h) != nil || h.Kind == "" {
		return ""
	}
	return h.Kind + "/" + cmpOr(h.Metadata.Namespace, "default") + "/" + h.Metadata.Name
}

// withApplied returns the scenario plus every object applied so far and data.
func (v *validator) withApplied(data []byte) []byte {
	replaced := map[string]bool{}
	for _, d := range docSep.Split(string(data), -1) {
		replaced[objectKey([]byte(d))] = true
	}
	out := slices.Clone(v.scenario)
	for _, k := range v.order {
		if replaced[k] {
			continue
		}
		out = append(append(out, "\n---\n"...), v.applied[k]...)
	}
	return append(append(out, "\n---\n"...), data...)
}

// remember records data's objects as applied (a later apply replaces an object).
func (v *validator) remember(data []byte) {
	for _, d := range docSep.Split(string(data), -1) {
		k := objectKey([]byte(d))
		if k == "" {
			continue
		}
		if _, ok := v.applied[k]; !ok {
			v.order = append(v.order, k)
		}
		v.applied[k] = []byte(d)
	}
}

// pod checks that the lab has the pod *ref names (findPod) and rewrites *ref to that
// pod's name, which the run asks the lab for; sidecar asks that it has a proxy too.
func (v *validator) pod(ref *string, field string, sidecar bool) *model.Pod {
	if *ref == "" {
		v.p.addf(field, "required")
		return nil
	}
	pod, err := findPod(v.m, *ref)
	if err != nil {
		v.p.addf(field, "%v", err)
		return nil
	}
	if sidecar && !pod.Sidecar.Inject {
		v.p.addf(field, "pod %q has no sidecar", pod.Name)
	}
	*ref = podName(v.m, pod)
	return pod
}

// podRef is pod for a PodRef, which keeps what the lab wrote for the commands it shows.
func (v *validator) podRef(r *PodRef, field string, sidecar bool) {
	r.shown = cmpOr(r.shown, r.Pod)
	v.pod(&r.Pod, field, sidecar)
}

func (v *validator) action(a Action, path string) {
	switch {
	case a.Apply != nil:
		// Objects are checked with the scenario and what earlier steps applied, as the
		// lab will hold them (deletes are not subtracted).
		if _, err := config.Load(v.p.file, v.withApplied(a.Apply.data)); err != nil {
			v.p.addf(path, "objects are not valid: %v", err)
		}
		v.remember(a.Apply.data)
	case a.Delete != nil:
		if len(a.Delete.Objects) == 0 {
			v.p.addf(path+".objects", "required")
		}
		for i, o := range a.Delete.Objects {
			if o.Kind == "" || o.Name == "" {
				v.p.addf(fmt.Sprintf("%s.objects[%d]", path, i), "kind and name are required")
			}
		}
	case a.Label != nil:
		v.label(*a.Label, path)
	case a.Traffic != nil:
		v.traffic(a.Traffic, path, 200)
	case a.Load != nil:
		v.traffic(a.Load, path, 50)
	case a.ControlPlaneStop != nil:
		if d := a.ControlPlaneStop.Duration.D(); d <= 0 || d > 10*time.Minute {
			v.p.addf(path+".duration", "want a duration up to 10m, got %v", d)
		}
	case a.RestartProxy != nil:
		v.podRef(a.RestartProxy, path+".pod", true)
	case a.KillProxy != nil:
		v.podRef(a.KillProxy, path+".pod", true)
	case a.Wait != nil:
		w := a.Wait
		if (w.Duration == 0) == (w.Until == nil) {
			v.p.addf(path, "set duration or until, one of them")
		}
		if w.Until != nil {
			kinds := 0
			for _, k := range checkKinds {
				if w.Until.set(k) {
					w.Until.Kind = k
					kinds++
				}
			}
			if kinds != 1 {
				v.p.addf(path+".until", "want exactly one check (one of %s)", strings.Join(checkKinds, ", "))
				return
			}
			v.check(*w.Until, path+".until."+w.Until.Kind)
		}
	}
}

// label checks a label action: a namespace the lab does not declare (the action
// applies it with its labels alone, which would drop declared ones), and labels that
// are labels.
func (v *validator) label(a LabelAction, path string) {
	if a.Namespace == "" {
		v.p.addf(path+".namespace", "required")
	}
	if len(a.Labels) == 0 {
		v.p.addf(path+".labels", "required")
	}
	for _, ns := range v.m.Namespaces {
		// kubectl apply's record of the object is no annotation the lab declared: the
		// label action's own apply writes its record in its place.
		annotations := len(ns.Annotations)
		if _, ok := ns.Annotations[config.LastAppliedAnnotation]; ok {
			annotations--
		}
		if ns.Name == a.Namespace && (len(ns.Labels) > 0 || annotations > 0) {
			v.p.addf(path+".namespace", "the lab declares namespace %q with labels or annotations; label a namespace it does not declare", a.Namespace)
		}
	}
	for k, val := range a.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.p.addf(path+".labels", "key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			v.p.addf(path+".labels."+k, "%s", strings.Join(errs, "; "))
		}
	}
}

func (v *validator) traffic(t *TrafficAction, path string, maxN int) {
	t.shown = cmpOr(t.shown, t.From)
	pod := v.pod(&t.From, path+".from", false)
	if t.N < 0 || t.N > maxN {
		v.p.addf(path+".count", "want 1..%d, got %d", maxN, t.N)
	}
	if err := (api.TrafficRequest{Pod: "-", URL: "http://x/", N: 1, Method: t.Method, Headers: t.Headers}).Validate(); err != nil {
		v.p.addf(path, "%v", err)
	}
	u, err := url.Parse(t.URL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		v.p.addf(path+".url", "want http://host[:port]/path, got %q", t.URL)
		return
	}
	if pod == nil {
		return
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if _, err := netip.ParseAddr(host); err == nil {
		return
	}
	if len(v.m.NameTable(pod.Namespace)[host]) == 0 {
		v.p.addf(path+".url", "the lab has no service %q that pod %s can resolve", u.Hostname(), pod.Name)
	}
}

func (v *validator) check(c Check, path string) {
	switch {
	case c.Distribution != nil:
		d := c.Distribution
		if d.By != "" && d.By != "version" && d.By != "pod" {
			v.p.addf(path+".by", "want version or pod, got %q", d.By)
		}
		if len(d.Want) == 0 {
			v.p.addf(path+".want", "required: the expected share of each version, in percent")
		}
		sum := 0.0
		for k, w := range d.Want {
			if w < 0 || w > 100 {
				v.p.addf(path+".want."+k, "want 0..100 percent, got %v", w)
			}
			sum += w
			if !v.hasGroup(k, d.By == "pod") {
				v.p.addf(path+".want."+k, "no pod of the lab has %s %q", cmpOr(d.By, "version"), k)
			}
		}
		if sum < 99.5 || sum > 100.5 {
			v.p.addf(path+".want", "shares add up to %v%%, want 100%%", sum)
		}
	case c.Status != nil:
		s := c.Status
		if s.Code != "error" && (len(s.Code) != 3 || s.Code < "100" || s.Code > "599") {
			v.p.addf(path+".code", "want an HTTP status (100-599) or \"error\", got %q", s.Code)
		}
		if s.Min == nil && s.Max == nil && s.Fraction == nil {
			v.p.addf(path, "set min, max or fraction")
		}
		if s.From != "" {
			v.pod(&s.From, path+".from", false)
		}
	case c.Latency != nil:
		l := c.Latency
		if !slices.Contains([]int{50, 90, 99, 100}, l.Percentile) {
			v.p.addf(path+".percentile", "want 50, 90, 99 or 100, got %d", l.Percentile)
		}
		if l.Below == 0 && l.Above == 0 {
			v.p.addf(path, "set below or above")
		}
	case c.ProxySynced != nil:
		v.pod(&c.ProxySynced.Pod, path+".pod", true)
		v.xdsType(c.ProxySynced.Type, path+".type")
	case c.Nack != nil:
		v.pod(&c.Nack.Pod, path+".pod", true)
		v.xdsType(c.Nack.Type, path+".type")
	case c.Stat != nil:
		v.pod(&c.Stat.Pod, path+".pod", true)
		if c.Stat.Name == "" {
			v.p.addf(path+".name", "required")
		}
		if !slices.Contains(statOps, c.Stat.Op) {
			v.p.addf(path+".op", "want one of %s, got %q", strings.Join(statOps, " "), c.Stat.Op)
		}
	case c.Epoch != nil:
		v.pod(&c.Epoch.Pod, path+".pod", true)
		if c.Epoch.AtLeast < 0 {
			v.p.addf(path+".atLeast", "want 0 or more")
		}
	case c.Denied != nil:
		v.podRef(c.Denied, path+".pod", true)
	case c.ProxyStale != nil:
		v.podRef(c.ProxyStale, path+".pod", true)
	case c.ProxyRestarted != nil:
		v.podRef(c.ProxyRestarted, path+".pod", true)
	case c.Header != nil:
		h := c.Header
		if h.Name == "" {
			v.p.addf(path+".name", "required: a response header name")
		}
		if h.Absent && (h.Min != nil || h.Max != nil || h.Fraction != nil) {
			v.p.addf(path+".absent", "absent excludes min, max and fraction")
		}
	case c.HBONE != nil:
		v.pod(&c.HBONE.From, path+".from", false)
		v.pod(&c.HBONE.To, path+".to", false)
	case c.MTLS != nil:
		v.pod(&c.MTLS.From, path+".from", true)
		if to := v.pod(&c.MTLS.To, path+".to", true); to != nil && len(v.m.ServicesFor(to)) == 0 {
			v.p.addf(path+".to", "no service selects pod %q", to.Name)
		}
		if id := c.MTLS.Identity; id != "" && !strings.HasPrefix(id, "spiffe://") {
			v.p.addf(path+".identity", "want a SPIFFE ID (spiffe://cluster.local/ns/NS/sa/SA), got %q", id)
		}
	}
}

func (v *validator) xdsType(t, field string) {
	if t != "" && !slices.Contains(xdsTypes, t) {
		v.p.addf(field, "want one of %s, got %q", strings.Join(xdsTypes, ", "), t)
	}
}

// hasGroup reports whether a pod is called name (byPod) or has version label name.
func (v *validator) hasGroup(name string, byPod bool) bool {
	for _, p := range v.m.Pods {
		if (byPod && p.Name == name) || (!byPod && p.Labels["version"] == name) {
			return true
		}
	}
	return false
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// set reports whether the check of this kind is set.
func (c *Check) set(kind string) bool {
	switch kind {
	case "distribution":
		return c.Distribution != nil
	case "status":
		return c.Status != nil
	case "latency":
		return c.Latency != nil
	case "proxy-synced":
		return c.ProxySynced != nil
	case "nack":
		return c.Nack != nil
	case "stat":
		return c.Stat != nil
	case "epoch":
		return c.Epoch != nil
	case "no-failures":
		return c.NoFailures != nil
	case "denied":
		return c.Denied != nil
	case "mtls":
		return c.MTLS != nil
	case "header":
		return c.Header != nil
	case "proxy-stale":
		return c.ProxyStale != nil
	case "root-rotated":
		return c.RootRotated != nil
	case "proxy-restarted":
		return c.ProxyRestarted != nil
	case "hbone":
		return c.HBONE != nil
	}
	return false
}
