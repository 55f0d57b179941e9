package hotrestart

import "testing"

func TestSocketNameFollowsEnvoy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		path   string
		role   Role
		baseID uint32
		epoch  uint32
		want   string
	}{
		{name: "default base id epoch 0 parent", role: RoleParent, want: "@envoy_domain_socket_parent_0"},
		{name: "default base id epoch 0 child", role: RoleChild, want: "@envoy_domain_socket_child_0"},
		{name: "base id is scaled by ten", role: RoleParent, baseID: 7, epoch: 1, want: "@envoy_domain_socket_parent_71"},
		{name: "epochs repeat every three", role: RoleChild, baseID: 7, epoch: 5, want: "@envoy_domain_socket_child_72"},
		{name: "epoch three reuses epoch zero's name", role: RoleParent, baseID: 2, epoch: 3, want: "@envoy_domain_socket_parent_20"},
		{name: "socket path is the prefix", path: "@custom", role: RoleParent, baseID: 1, epoch: 2, want: "@custom_parent_12"},
		{name: "large base id does not overflow", role: RoleParent, baseID: 4294967295, epoch: 1, want: "@envoy_domain_socket_parent_42949672951"},
	} {
		if got := SocketName(tc.path, tc.role, tc.baseID, tc.epoch); got != tc.want {
			t.Errorf("%s: SocketName = %q, want %q", tc.name, got, tc.want)
		}
	}
}
