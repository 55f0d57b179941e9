package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// rbacGroup is the API group of Role and RoleBinding.
const rbacGroup = "rbac.authorization.k8s.io"

// roleVerbs are the verbs kubectl create role accepts.
var roleVerbs = []string{"*", "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "use", "bind", "escalate", "impersonate"}

// newCreateRoleCmd is kubectl create role, as the egress TLS origination task runs it (a
// Role that lets sleep's service account list secrets). The lab stores the Role as the
// API server would; a lab has no API clients to authorize, so it acts on nothing
// (describe says so). namespace is create's -n.
func newCreateRoleCmd(g *globalFlags, namespace *string) *cobra.Command {
	var verbs, resources, resourceNames []string
	cmd := &cobra.Command{
		Use:   "role NAME --verb=VERB --resource=RESOURCE[.GROUP] [--resource-name=NAME]",
		Short: "Create a Role with one rule, as kubectl create role (stored; a lab authorizes no API clients)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(verbs) == 0 || len(resources) == 0 {
				return fmt.Errorf("error: at least one verb and one resource must be specified") //nolint:staticcheck // kubectl's text
			}
			for _, v := range verbs {
				if !slices.Contains(roleVerbs, v) {
					return fmt.Errorf("error: invalid verb: '%s'", v) //nolint:staticcheck // kubectl's text
				}
			}
			c, kinds, err := g.kindsClient(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			type rule struct {
				APIGroups     []string `json:"apiGroups"`
				Resources     []string `json:"resources"`
				ResourceNames []string `json:"resourceNames,omitempty"`
				Verbs         []string `json:"verbs"`
			}
			// kubectl makes one rule per API group, its resources in the order given.
			var rules []rule
			for _, r := range resources {
				group, resource := "", r
				if r != "*" {
					k, ok := kinds.Lookup(r)
					if !ok {
						return fmt.Errorf("error: the server doesn't have a resource type %q", r) //nolint:staticcheck // kubectl's text
					}
					group, resource = k.Group, k.Resource(true)
				}
				i := slices.IndexFunc(rules, func(x rule) bool { return x.APIGroups[0] == group })
				if i < 0 {
					rules = append(rules, rule{APIGroups: []string{group}, ResourceNames: resourceNames, Verbs: verbs})
					i = len(rules) - 1
				}
				rules[i].Resources = append(rules[i].Resources, resource)
			}
			obj := kubeObject(rbacGroup+"/v1", "Role", args[0], *namespace)
			obj["rules"] = rules
			return createRBAC(cmd, g, obj)
		},
	}
	cmd.Flags().StringSliceVar(&verbs, "verb", nil, "verbs that apply to the resources in the rule")
	cmd.Flags().StringSliceVar(&resources, "resource", nil, "resources the rule applies to (RESOURCE or RESOURCE.GROUP)")
	cmd.Flags().StringArrayVar(&resourceNames, "resource-name", nil, "names of the resources the rule allows")
	return cmd
}

// newCreateRoleBindingCmd is kubectl create rolebinding: a RoleBinding of a Role or
// ClusterRole to service accounts, users or groups, stored as the API server would.
func newCreateRoleBindingCmd(g *globalFlags, namespace *string) *cobra.Command {
	var role, clusterRole string
	var serviceAccounts, users, groups []string
	cmd := &cobra.Command{
		Use:   "rolebinding NAME --role=NAME|--clusterrole=NAME [--serviceaccount=NAMESPACE:NAME] [--user=NAME] [--group=NAME]",
		Short: "Create a RoleBinding, as kubectl create rolebinding (stored; a lab authorizes no API clients)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (role == "") == (clusterRole == "") {
				return fmt.Errorf("error: exactly one of clusterrole or role must be specified") //nolint:staticcheck // kubectl's text
			}
			ref := map[string]any{"apiGroup": rbacGroup, "kind": "Role", "name": role}
			if clusterRole != "" {
				ref["kind"], ref["name"] = "ClusterRole", clusterRole
			}
			var subjects []map[string]any
			for _, u := range users {
				subjects = append(subjects, map[string]any{"apiGroup": rbacGroup, "kind": "User", "name": u})
			}
			for _, gr := range groups {
				subjects = append(subjects, map[string]any{"apiGroup": rbacGroup, "kind": "Group", "name": gr})
			}
			for _, sa := range serviceAccounts {
				ns, name, ok := strings.Cut(sa, ":")
				if !ok || ns == "" || name == "" {
					return fmt.Errorf("error: serviceaccount must be <namespace>:<name>") //nolint:staticcheck // kubectl's text
				}
				subjects = append(subjects, map[string]any{"kind": "ServiceAccount", "namespace": ns, "name": name})
			}
			obj := kubeObject(rbacGroup+"/v1", "RoleBinding", args[0], *namespace)
			obj["roleRef"] = ref
			if len(subjects) > 0 {
				obj["subjects"] = subjects
			}
			return createRBAC(cmd, g, obj)
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "the Role this binding refers to")
	cmd.Flags().StringVar(&clusterRole, "clusterrole", "", "the ClusterRole this binding refers to")
	cmd.Flags().StringArrayVar(&serviceAccounts, "serviceaccount", nil, "service accounts to bind, as NAMESPACE:NAME")
	cmd.Flags().StringArrayVar(&users, "user", nil, "user names to bind")
	cmd.Flags().StringArrayVar(&groups, "group", nil, "groups to bind")
	return cmd
}

// createRBAC applies an rbac.authorization.k8s.io object unless one of its kind and name
// exists in its namespace (the API server's AlreadyExists) and prints kubectl's line.
func createRBAC(cmd *cobra.Command, g *globalFlags, obj map[string]any) error {
	kind := strings.ToLower(obj["kind"].(string))
	name := obj["metadata"].(map[string]any)["name"].(string)
	return createObject(cmd, g, obj, kind+"."+rbacGroup, func() error {
		return fmt.Errorf("Error from server (AlreadyExists): %ss.%s %q already exists", kind, rbacGroup, name) //nolint:staticcheck // kubectl's text
	})
}
