// Package hotrestart is the built-in data plane's hot restart, following Envoy's
// (source/server/hot_restart*.cc): a process at restart epoch N binds two AF_UNIX
// datagram sockets in the abstract namespace, named from --base-id and the epoch as Envoy
// names them, and, as the child of epoch N-1, asks its parent over them to shut down its
// admin listener, to pass each listen socket (the fd travels as SCM_RIGHTS, so both
// processes share one accept queue), for its stats (counter deltas and gauges), to drain
// its listeners and finally to terminate.
//
// Messages have the shape of envoy.HotRestartMessage (hot_restart.proto) and are encoded
// by hand with protowire using Envoy's field numbers; each message is framed as an
// 8-byte big-endian length and the payload, chunked into datagrams of at most 4096 bytes.
// Wire compatibility with real Envoy is not a goal: the socket names are not padded to
// sizeof(sockaddr_un) and Version differs from Envoy's so the two never mix.
package hotrestart

import "fmt"

// Version is the hot restart compatibility version printed by --hot-restart-version and
// reported by /server_info and /hot_restart_version. Processes with different versions
// must not hot restart into each other.
const Version = "meshlab.1"

// DefaultSocketPath is Envoy's default --socket-path: a name in the abstract namespace.
const DefaultSocketPath = "@envoy_domain_socket"

// MaxConcurrentProcesses is how many epochs may run at once, as in Envoy: socket names
// repeat every three epochs.
const MaxConcurrentProcesses = 3

// Role says which of a process's two sockets a name is for.
type Role string

// Roles: a process receives requests from its child on the parent socket and replies
// from its parent on the child socket.
const (
	RoleParent Role = "parent"
	RoleChild  Role = "child"
)

// SocketName returns Envoy's domain socket name for role at epoch under baseID:
// "<path>_<role>_<baseID*10 + epoch%3>", e.g. "@envoy_domain_socket_parent_0".
func SocketName(path string, role Role, baseID, epoch uint32) string {
	if path == "" {
		path = DefaultSocketPath
	}
	return fmt.Sprintf("%s_%s_%d", path, role, uint64(baseID)*10+uint64(epoch%MaxConcurrentProcesses))
}
