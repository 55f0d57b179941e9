package main

import "strings"

// namespaceFirst moves kubectl's namespace flag written before the verb (`kubectl -n
// istio-system get service ...`, as Istio's docs write it) to just after the verb, where
// meshlab's verbs declare -n: "-n NS VERB ..." becomes "VERB -n NS ...". Other
// arguments are returned as they are.
func namespaceFirst(args []string) []string {
	if len(args) == 0 {
		return args
	}
	var flag []string
	rest := args[1:]
	switch a := args[0]; {
	case a == "-n" || a == "--namespace":
		if len(rest) < 2 {
			return args
		}
		flag, rest = []string{"-n", rest[0]}, rest[1:]
	case strings.HasPrefix(a, "--namespace="), strings.HasPrefix(a, "-n="):
		_, v, _ := strings.Cut(a, "=")
		flag = []string{"-n", v}
	default:
		return args
	}
	if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		return args
	}
	out := append([]string{rest[0]}, flag...)
	return append(out, rest[1:]...)
}
