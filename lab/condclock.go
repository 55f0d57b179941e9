package lab

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// conditionClock gives the status conditions of the lab's Kubernetes view their
// lastTransitionTime, as a controller sets it: when the condition's status last changed.
// The view renders status when it is read, so the clock remembers each condition's
// status from read to read: a condition read for the first time changed when its object
// was made (a controller writes status as the object appears); one read with another
// status than the last read changed at that read (the lab does not know more precisely
// when between the two reads the change happened). An object made again is a new one
// (its key carries its creation time).
type conditionClock struct {
	mu   sync.Mutex
	seen map[string]conditionSeen
}

type conditionSeen struct {
	status string
	at     time.Time
}

// transition returns when condition typ of the object at key, made at created, last
// changed to status, read at now. A nil clock answers created.
func (c *conditionClock) transition(key, typ, status string, created, now time.Time) metav1.Time {
	if c == nil {
		return metav1.NewTime(created.Truncate(time.Second))
	}
	k := key + "@" + created.UTC().Format(time.RFC3339) + "#" + typ
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]conditionSeen{}
	}
	s, ok := c.seen[k]
	switch {
	case !ok:
		s = conditionSeen{status: status, at: created}
	case s.status != status:
		s = conditionSeen{status: status, at: now}
	}
	c.seen[k] = s
	return metav1.NewTime(s.at.Truncate(time.Second))
}

// stamp sets the lastTransitionTime of conds, the conditions of the object at key.
func (c *conditionClock) stamp(key string, conds []metav1.Condition, created, now time.Time) {
	for i := range conds {
		conds[i].LastTransitionTime = c.transition(key, conds[i].Type, string(conds[i].Status), created, now)
	}
}

// stampRoute sets the lastTransitionTime of every parent's conditions of route st.
func (c *conditionClock) stampRoute(key string, st *gwv1.RouteStatus, created, now time.Time) {
	for i := range st.Parents {
		pr := st.Parents[i].ParentRef
		ns, section := "", ""
		if pr.Namespace != nil {
			ns = string(*pr.Namespace)
		}
		if pr.SectionName != nil {
			section = string(*pr.SectionName)
		}
		pk := key + "/parent/" + ns + "/" + string(pr.Name) + "/" + section
		c.stamp(pk, st.Parents[i].Conditions, created, now)
	}
}

// stampPod sets the lastTransitionTime of a pod's conditions.
func (c *conditionClock) stampPod(p *corev1.Pod, now time.Time) {
	key := "Pod/" + p.Namespace + "/" + p.Name
	for i := range p.Status.Conditions {
		cd := &p.Status.Conditions[i]
		cd.LastTransitionTime = c.transition(key, string(cd.Type), string(cd.Status), p.CreationTimestamp.Time, now)
	}
}

// stampDeployment sets the lastTransitionTime (and lastUpdateTime, which the lab
// does not tell apart) of a Deployment's conditions.
func (c *conditionClock) stampDeployment(d *appsv1.Deployment, now time.Time) {
	key := "Deployment/" + d.Namespace + "/" + d.Name
	for i := range d.Status.Conditions {
		cd := &d.Status.Conditions[i]
		cd.LastTransitionTime = c.transition(key, string(cd.Type), string(cd.Status), d.CreationTimestamp.Time, now)
		cd.LastUpdateTime = cd.LastTransitionTime
	}
}
