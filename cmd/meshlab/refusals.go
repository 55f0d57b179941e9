package main

import (
	"errors"
	"slices"
	"strings"
)

// A refusal is a kubectl or istioctl form that Istio's task pages use and meshlab does
// not take (testdata/docs_commands.txt marks each such line "# differs: WHY"): the words
// that begin the command line, the text of the parse error meshlab's command tree gives
// for it, and why, with what to type instead. meshlab prints why in place of cobra's
// bare "unknown command" or "unknown flag", so that a user who types the docs' line
// learns what to do.
type refusal struct {
	words  []string // the command line's first words, after kubectl or istioctl
	errHas string   // a text of the parse error ("" for any)
	why    string
}

// refusals are meshlab's; TestDocsCommandsParse holds each "# differs:" line of the docs
// to one of them, word for word.
var refusals = []refusal{
	{
		words: []string{"kustomize"}, errHas: `unknown command "kustomize"`,
		why: "kustomize: meshlab has no kustomize verb (it builds nothing from a kustomization and fetches no CRDs from GitHub); " +
			"the lab's Gateway API CRDs are built in, so the page's `get crd gateways.gateway.networking.k8s.io` finds them and its `|| kustomize ...` never runs",
	},
	{
		words: []string{"manifest"}, errHas: `unknown command "manifest"`,
		why: "manifest: istioctl manifest apply is the name install had before Istio 1.6, and manifest generate renders Kubernetes manifests a lab does not use: " +
			"install with meshlab install -f IstioOperator.yaml",
	},
	{
		words: []string{"install"}, errHas: "unknown command",
		why: "install: install takes no argument (nor does istioctl's); a profile is --set profile=NAME",
	},
}

// explainRefusal returns, for a command line that meshlab's command tree refused with
// err (args as Execute read them), the refusal it meets as the error to print; any
// other error is returned unchanged.
func explainRefusal(args []string, err error) error {
	if err == nil {
		return nil
	}
	words := commandWords(args)
	for _, r := range refusals {
		if len(words) >= len(r.words) && slices.Equal(words[:len(r.words)], r.words) && strings.Contains(err.Error(), r.errHas) {
			return errors.New(r.why)
		}
	}
	return err
}

// commandWords are args' words that are not flags, up to the first --: the values of
// the flags that take one as a word of their own (-n and the global flags) are skipped;
// the refusals' words come before any other flag in the docs' lines.
func commandWords(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out
		case slices.Contains(valueFlags, a):
			i++
		case strings.HasPrefix(a, "-"):
		default:
			out = append(out, a)
		}
	}
	return out
}

// valueFlags are the flags that may come before a refused command's words with their
// value as the next word: kubectl's namespace and meshlab's global flags.
var valueFlags = []string{"-n", "--namespace", "--lab", "--name", "--run-root", "--log-level"}
