package web

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshlab/meshlab/api"
)

// fakeServices knows Service backend in namespace default; it records what it was asked.
type fakeServices struct{ asked []string }

func (f *fakeServices) DescribeService(_ context.Context, namespace, name string) (api.ServiceView, error) {
	f.asked = append(f.asked, namespace+"/"+name)
	switch {
	case name == "backend" && (namespace == "" || namespace == "default"):
		return api.ServiceView{Name: name, Namespace: "default", Ports: []api.ServicePortView{{Port: 8080, MTLS: "STRICT"}}}, nil
	case name == "boom":
		return api.ServiceView{}, errors.New("model gone")
	}
	return api.ServiceView{}, fmt.Errorf("%w %q (services: backend)", api.ErrUnknownService, name)
}

// The typed client reaches the describer with the name and namespace it was given, and
// its error classes come back through the route's status codes.
func TestServiceRoutes(t *testing.T) {
	t.Parallel()
	fs := &fakeServices{}
	c := serveUnix(t, ServiceRoutes(fs))
	ctx := context.Background()

	v, err := c.DescribeService(ctx, "default", "backend")
	if err != nil || v.Namespace != "default" || len(v.Ports) != 1 || v.Ports[0].MTLS != "STRICT" {
		t.Errorf("backend: %+v, %v", v, err)
	}
	_, err = c.DescribeService(ctx, "", "nope")
	if !errors.Is(err, api.ErrNotFound) || err.Error() != `unknown service "nope" (services: backend)` {
		t.Errorf("unknown service: %v, want ErrNotFound with the server's message", err)
	}
	if _, err := c.DescribeService(ctx, "", "boom"); !errors.Is(err, api.ErrInternal) {
		t.Errorf("failing describer: %v, want ErrInternal", err)
	}
	if want := []string{"default/backend", "/nope", "/boom"}; fmt.Sprint(fs.asked) != fmt.Sprint(want) {
		t.Errorf("asked %q, want %q", fs.asked, want)
	}
}
