package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/api"
)

// lookupKind resolves a kind as the user typed it against the lab's list of kinds (its
// discovery, as kubectl resolves resource names against an API server's), reporting
// whether the lab holds such a kind.
func lookupKind(ctx context.Context, c *api.Client, kind string) (api.Kind, bool, error) {
	kinds, err := c.Kinds(ctx)
	if err != nil {
		return api.Kind{}, false, err
	}
	k, ok := kinds.Lookup(kind)
	return k, ok, nil
}

// unknownName is the one error shape for a name the lab does not have: what was asked,
// and every name it could have been.
func unknownName(what, name string, valid []string) error {
	return fmt.Errorf("unknown %s %q (valid: %s)", what, name, validList(valid))
}

func validList(valid []string) string {
	if len(valid) == 0 {
		return "none"
	}
	return strings.Join(valid, ", ")
}

// objectNames returns the names of the lab's objects of kind (any spelling the lab API
// takes), namespaced as "ns/name" when the lab holds that kind in more than one namespace.
func objectNames(ctx context.Context, c *api.Client, kind string) ([]string, error) {
	objs, err := c.Objects(ctx, kind, "", "")
	if err != nil {
		return nil, err
	}
	namespaces := map[string]bool{}
	for _, o := range objs {
		namespaces[o.Namespace] = true
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		if len(namespaces) > 1 {
			out = append(out, o.Namespace+"/"+o.Name)
		} else {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// checkObject returns nil when the lab holds an object of kind named name (in namespace,
// when set), else kubectl's NotFound (`Error from server (NotFound): services "x" not
// found`); a kind the lab's discovery does not list gets the objects of that name it
// holds. An unknown kind comes back from the lab API with the kinds it knows.
func checkObject(ctx context.Context, c *api.Client, kind, namespace, name string) error {
	objs, err := c.Objects(ctx, kind, namespace, name)
	if err != nil {
		return err
	}
	if len(objs) > 0 {
		return nil
	}
	k, ok, err := lookupKind(ctx, c, kind)
	if err != nil {
		return err
	}
	if ok {
		return notFound(k, name)
	}
	names, err := objectNames(ctx, c, kind)
	if err != nil {
		return err
	}
	if namespace != "" {
		return unknownName(kind, namespace+"/"+name, names)
	}
	return unknownName(kind, name, names)
}
