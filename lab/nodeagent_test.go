package lab

import (
	"errors"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

func TestWithRedirection(t *testing.T) {
	a := &model.Pod{Name: "a", Namespace: "default", Annotations: map[string]string{"x": "1"}}
	b := &model.Pod{Name: "b", Namespace: "default"}
	m := model.New(nil, []*model.Pod{a, b})
	on := withRedirection(m, "b", true)
	if on == m || !on.Pod("b").AmbientRedirected() || m.Pod("b").AmbientRedirected() || on.Pod("a") != a {
		t.Fatalf("annotating b: a new model with only b changed, the old one untouched")
	}
	if withRedirection(on, "b", true) != on || withRedirection(m, "nope", true) != m {
		t.Fatal("a change that changes nothing must return the same model")
	}
	onA := withRedirection(on, "a", true)
	if !onA.Pod("a").AmbientRedirected() || a.Annotations[model.AnnotationAmbientRedirection] != "" || onA.Pod("a").Annotations["x"] != "1" {
		t.Fatal("annotating a must keep its other annotations and leave the old pod's map alone")
	}
	off := withRedirection(onA, "a", false)
	if off.Pod("a").AmbientRedirected() || !onA.Pod("a").AmbientRedirected() {
		t.Fatal("removing the annotation must not change the previous model")
	}
}

func TestInpodLines(t *testing.T) {
	saved := "# Generated\n*nat\n:OUTPUT ACCEPT [0:0]\n[1:60] -A OUTPUT -p udp -j REDIRECT --to-ports 53\n[2:120] -A OUTPUT -j ISTIO_OUTPUT\n[3:180] -A ISTIO_OUTPUT -p tcp -j REDIRECT --to-ports 15001\nCOMMIT\n"
	want := "*nat\n[2:120] -A OUTPUT -j ISTIO_OUTPUT\n[3:180] -A ISTIO_OUTPUT -p tcp -j REDIRECT --to-ports 15001\n"
	if got := inpodLines(saved); got != want {
		t.Fatalf("inpodLines:\n%s\nwant:\n%s", got, want)
	}
}

func TestZtunnelAdminWithoutZtunnel(t *testing.T) {
	_, err := (&Lab{}).below().ZtunnelAdmin(t.Context(), "/config_dump")
	if !errors.Is(err, ErrNoZtunnel) {
		t.Fatalf("ZtunnelAdmin of a lab without ambient pods = %v, want ErrNoZtunnel", err)
	}
}
