package xds

import (
	"slices"
	"testing"
)

// TestMigratePrincipals holds migratePrincipals to istiod's trust domain bundle
// (pilot/pkg/security/trustdomain: ReplaceTrustDomainAliases): what each principal of a
// policy becomes for a mesh of trust domain tds[0] and aliases tds[1:].
func TestMigratePrincipals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		tds        []string
		principals []string
		want       []string
	}{
		{name: "default trust domain unchanged", tds: []string{"cluster.local"},
			principals: []string{"cluster.local/ns/foo/sa/bar"}, want: []string{"cluster.local/ns/foo/sa/bar"}},
		{name: "any principal", tds: []string{"cluster.local"}, principals: []string{"*"}, want: []string{"*"}},
		{name: "any trust domain", tds: []string{"new-td"}, principals: []string{"*/ns/foo/sa/bar"}, want: []string{"*/ns/foo/sa/bar"}},
		{name: "cluster.local stands for the trust domain", tds: []string{"new-td"},
			principals: []string{"cluster.local/ns/foo/sa/bar"}, want: []string{"new-td/ns/foo/sa/bar"}},
		{name: "cluster.local stands for the trust domain and its aliases", tds: []string{"new-td", "old-td"},
			principals: []string{"cluster.local/ns/foo/sa/bar"}, want: []string{"new-td/ns/foo/sa/bar", "old-td/ns/foo/sa/bar"}},
		{name: "old trust domain without alias kept", tds: []string{"new-td"},
			principals: []string{"old-td/ns/sleep-allow/sa/sleep"}, want: []string{"old-td/ns/sleep-allow/sa/sleep"}},
		{name: "old trust domain as alias", tds: []string{"new-td", "old-td"},
			principals: []string{"old-td/ns/sleep-allow/sa/sleep"}, want: []string{"new-td/ns/sleep-allow/sa/sleep", "old-td/ns/sleep-allow/sa/sleep"}},
		{name: "the trust domain itself", tds: []string{"old-td"},
			principals: []string{"old-td/ns/sleep-allow/sa/sleep"}, want: []string{"old-td/ns/sleep-allow/sa/sleep"}},
		{name: "two aliases two principals", tds: []string{"td2", "td1", "cluster.local"},
			principals: []string{"cluster.local/ns/foo/sa/bar", "td1/ns/yyy/sa/zzz"},
			want: []string{
				"td2/ns/foo/sa/bar", "td1/ns/foo/sa/bar", "cluster.local/ns/foo/sa/bar",
				"td2/ns/yyy/sa/zzz", "td1/ns/yyy/sa/zzz", "cluster.local/ns/yyy/sa/zzz",
			}},
		{name: "principal's trust domain a suffix wildcard", tds: []string{"td2", "foo-td1", "cluster.local"},
			principals: []string{"*-td1/ns/foo/sa/bar"}, want: []string{"td2/ns/foo/sa/bar", "*-td1/ns/foo/sa/bar", "cluster.local/ns/foo/sa/bar"}},
		{name: "wildcard matching both kept once", tds: []string{"new-td", "old-td"},
			principals: []string{"*-td/ns/some-ns/sa/some-sa"}, want: []string{"*-td/ns/some-ns/sa/some-sa"}},
		{name: "other trust domain kept", tds: []string{"td1", "td2"},
			principals: []string{"some-td/ns/foo/sa/bar"}, want: []string{"some-td/ns/foo/sa/bar"}},
		{name: "one principal of an alias, one of another", tds: []string{"new-td", "td2", "td3"},
			principals: []string{"td1/ns/some-ns/sa/some-sa", "td2/ns/foo/sa/bar"},
			want:       []string{"td1/ns/some-ns/sa/some-sa", "new-td/ns/foo/sa/bar", "td2/ns/foo/sa/bar", "td3/ns/foo/sa/bar"}},
		{name: "empty trust domain kept", tds: []string{"new-td", "td2"},
			principals: []string{"/ns/some-ns/sa/some-sa"}, want: []string{"/ns/some-ns/sa/some-sa"}},
		{name: "not five segments kept", tds: []string{"new-td", "old-td"},
			principals: []string{"old-td/ns/foo", "spiffe://old-td/ns/foo/sa/bar"}, want: []string{"old-td/ns/foo", "spiffe://old-td/ns/foo/sa/bar"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := migratePrincipals(tc.tds, tc.principals); !slices.Equal(got, tc.want) {
				t.Errorf("migratePrincipals(%q, %q) = %q, want %q", tc.tds, tc.principals, got, tc.want)
			}
		})
	}
}

// TestExpandSANs: a service's accounts in every alias, as istiod's ExpandWithTrustDomains.
func TestExpandSANs(t *testing.T) {
	t.Parallel()
	ids := []string{"spiffe://new-td/ns/default/sa/httpbin"}
	if got := expandSANs(ids, nil); !slices.Equal(got, ids) {
		t.Errorf("no aliases: %q", got)
	}
	want := []string{"spiffe://new-td/ns/default/sa/httpbin", "spiffe://old-td/ns/default/sa/httpbin"}
	if got := expandSANs(ids, []string{"old-td"}); !slices.Equal(got, want) {
		t.Errorf("alias old-td: %q, want %q", got, want)
	}
}
