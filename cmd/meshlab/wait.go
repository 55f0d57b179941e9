package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/jsonpath"

	"github.com/meshlab/meshlab/api"
)

// waitConfig is what `meshlab wait` reads.
type waitConfig struct {
	forSpec   string        // --for: condition=NAME[=VALUE], jsonpath='{...}'[=VALUE] or delete
	namespace string        // "" for every namespace
	selector  string        // -l
	all       bool          // --all: every object of the kind
	timeout   time.Duration // 0: look once; negative: a week, as kubectl
	interval  time.Duration // between looks
}

func newWaitCmd(g *globalFlags) *cobra.Command {
	cfg := &waitConfig{interval: 250 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "wait (TYPE/NAME ... | TYPE NAME ... | TYPE -l SELECTOR | TYPE --all) --for=CONDITION",
		Short: "Wait for a condition on objects of a running lab (like kubectl wait)",
		Example: `  meshlab wait --for=condition=programmed gtw/httpbin-gateway
  meshlab wait --for=condition=available deploy/httpbin -n foo --timeout=60s
  meshlab wait --for=condition=ready pod -l app=curl
  meshlab wait --for=jsonpath='{.status.phase}'=Running pod -l app=httpbin
  meshlab wait --for=delete pod/curl-5b549b49b8-m2hmt`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, err := parseWaitFor(cfg.forSpec)
			if err != nil {
				return err
			}
			targets, err := parseWaitTargets(args, cfg.selector != "" || cfg.all)
			if err != nil {
				return err
			}
			c, kinds, err := g.kindsClient(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			return runWait(cmd.Context(), c.KubeObjects, kinds, cfg, cond, targets, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&cfg.forSpec, "for", "", "condition=NAME[=VALUE] (value default true), jsonpath='{EXPR}'[=VALUE] or delete (required)")
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "", "only this namespace (default: all)")
	cmd.Flags().StringVarP(&cfg.selector, "selector", "l", "", "label selector, as kubectl's")
	cmd.Flags().BoolVar(&cfg.all, "all", false, "every object of the kind")
	cmd.Flags().DurationVar(&cfg.timeout, "timeout", 30*time.Second, "how long to wait (0: look once; negative: a week), as kubectl's")
	_ = cmd.MarkFlagRequired("for")
	return cmd
}

// waitFor is a parsed --for.
type waitFor struct {
	kind  string // "condition", "jsonpath" or "delete"
	name  string // the condition's type, or the jsonpath expression as written
	value string // the wanted status or value ("" with jsonpath: the field exists)
	jp    *jsonpath.JSONPath
}

// parseWaitFor reads kubectl wait's --for forms.
func parseWaitFor(s string) (waitFor, error) {
	switch {
	case s == "delete":
		return waitFor{kind: "delete"}, nil
	case strings.HasPrefix(s, "condition="):
		name, value, hasValue := strings.Cut(strings.TrimPrefix(s, "condition="), "=")
		if name == "" {
			return waitFor{}, fmt.Errorf("--for %q: names no condition (condition=Ready)", s)
		}
		if !hasValue {
			value = "true"
		}
		return waitFor{kind: "condition", name: name, value: value}, nil
	case strings.HasPrefix(s, "jsonpath="):
		expr := strings.TrimPrefix(s, "jsonpath=")
		value := ""
		if i := strings.LastIndex(expr, "}="); i >= 0 {
			expr, value = expr[:i+1], expr[i+2:]
		} else if !strings.HasSuffix(expr, "}") {
			expr, value, _ = strings.Cut(expr, "=")
		}
		if !strings.HasPrefix(expr, "{") {
			expr = "{" + expr + "}"
		}
		jp := jsonpath.New("wait").AllowMissingKeys(true)
		if err := jp.Parse(expr); err != nil {
			return waitFor{}, fmt.Errorf("--for %q: parse %s: %w", s, expr, err)
		}
		return waitFor{kind: "jsonpath", name: expr, value: value, jp: jp}, nil
	}
	return waitFor{}, fmt.Errorf("--for %q: want condition=NAME[=VALUE], jsonpath='{EXPR}'[=VALUE] or delete", s)
}

// met reports whether obj (unstructured, as decodeUnstructured gives it) meets w; a
// deleted object meets only delete.
func (w waitFor) met(obj any) (bool, error) {
	switch w.kind {
	case "condition":
		status, _ := obj.(map[string]any)["status"].(map[string]any)
		conds, _ := status["conditions"].([]any)
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if t, _ := cm["type"].(string); strings.EqualFold(t, w.name) {
				s, _ := cm["status"].(string)
				return strings.EqualFold(s, w.value), nil
			}
		}
		return false, nil
	case "jsonpath":
		results, err := w.jp.FindResults(obj)
		if err != nil {
			return false, err
		}
		var found []reflect.Value
		for _, r := range results {
			found = append(found, r...)
		}
		if len(found) == 0 {
			return false, nil
		}
		if w.value == "" {
			return true, nil
		}
		for _, v := range found {
			var buf bytes.Buffer
			if err := w.jp.PrintResults(&buf, []reflect.Value{v}); err != nil {
				return false, err
			}
			if buf.String() != w.value {
				return false, nil
			}
		}
		return true, nil
	}
	return false, nil
}

// waitTarget is one TYPE[/NAME] to wait on; name "" takes every object of the kind
// that -l (or --all) selects.
type waitTarget struct{ kind, name string }

// parseWaitTargets reads kubectl wait's arguments: TYPE/NAME..., or TYPE NAME..., or
// TYPE alone with -l or --all (selecting).
func parseWaitTargets(args []string, selecting bool) ([]waitTarget, error) {
	var out []waitTarget
	if !strings.Contains(args[0], "/") {
		if len(args) == 1 {
			if !selecting {
				return nil, fmt.Errorf("wait %s: name the objects (%s NAME or %s/NAME), or select them with -l or --all", args[0], args[0], args[0])
			}
			return []waitTarget{{kind: args[0]}}, nil
		}
		for _, n := range args[1:] {
			if strings.Contains(n, "/") {
				return nil, fmt.Errorf("wait: %q: after a TYPE, give names, not TYPE/NAME", n)
			}
			out = append(out, waitTarget{kind: args[0], name: n})
		}
		return out, nil
	}
	for _, a := range args {
		kind, name, ok := strings.Cut(a, "/")
		if !ok || kind == "" || name == "" {
			return nil, fmt.Errorf("wait: %q: want TYPE/NAME as every argument after the first TYPE/NAME", a)
		}
		out = append(out, waitTarget{kind: kind, name: name})
	}
	return out, nil
}

// kubeLister lists the lab's Kubernetes view (api.Client.KubeObjects).
type kubeLister func(ctx context.Context, kind, namespace, name, selector string) ([]api.KubeObject, error)

// errWaitTimeout marks a wait that ran out of time.
var errWaitTimeout = errors.New("timed out waiting for the condition")

// runWait waits, as kubectl wait, until each object the targets name meets cond,
// printing "<resource>/<name> condition met" for each as it does; the objects are
// those present when it starts (none is an error, except for delete). On timeout the
// error names the first object still waited on.
func runWait(ctx context.Context, list kubeLister, kinds api.Kinds, cfg *waitConfig, cond waitFor, targets []waitTarget, out io.Writer) error {
	timeout := cfg.timeout
	if timeout < 0 {
		timeout = 7 * 24 * time.Hour
	}
	deadline := time.Now().Add(timeout)
	type pending struct {
		kind, namespace, name string
	}
	var todo []pending
	for _, t := range targets {
		sel := cfg.selector
		if t.name != "" {
			sel = ""
		}
		objs, err := list(ctx, t.kind, cfg.namespace, t.name, sel)
		if err != nil {
			return err
		}
		if len(objs) == 0 && cond.kind != "delete" {
			if t.name != "" {
				return fmt.Errorf("%s %q not found%s", resourceName(kinds, t.kind, false), t.name, inNamespace(cfg.namespace))
			}
			return errors.New("no matching resources found")
		}
		for _, o := range objs {
			todo = append(todo, pending{kind: t.kind, namespace: o.Namespace, name: o.Name})
		}
	}
	for _, p := range todo {
		for {
			objs, err := list(ctx, p.kind, p.namespace, p.name, "")
			if err != nil {
				return err
			}
			ok := len(objs) == 0 && cond.kind == "delete"
			if len(objs) == 1 && cond.kind != "delete" {
				obj, err := decodeUnstructured(objs[0].Object)
				if err != nil {
					return err
				}
				if ok, err = cond.met(obj); err != nil {
					return fmt.Errorf("wait on %s/%s: %w", resourceName(kinds, p.kind, false), p.name, err)
				}
			}
			if ok {
				fmt.Fprintf(out, "%s/%s condition met\n", resourceName(kinds, p.kind, false), p.name)
				break
			}
			if !time.Now().Before(deadline) {
				return fmt.Errorf("%w on %s/%s", errWaitTimeout, resourceName(kinds, p.kind, true), p.name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(cfg.interval, time.Until(deadline))):
			}
		}
	}
	return nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// resourceName is kubectl's name of a kind in its messages: "pod", "deployment.apps",
// "gateway.gateway.networking.k8s.io" (plural without the group: "pods", "deployments"),
// for a kind as the user typed it, resolved against the lab's kinds.
func resourceName(kinds api.Kinds, kind string, plural bool) string {
	if isPodsKind(kind) {
		return api.Kind{Kind: "Pod"}.Resource(plural)
	}
	k, ok := kinds.Lookup(kind)
	if !ok {
		return kind
	}
	return k.Resource(plural)
}
