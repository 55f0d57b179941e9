// Package netns makes Linux network namespaces, links, addresses and routes, and runs code
// and processes inside namespaces. It knows nothing of meshes: it makes what it is given.
//
// Named namespaces follow iproute2's convention (`ip netns add`): a bind mount of the
// namespace file at /run/netns/<name>, so `ip netns exec` and this package see the same
// namespaces. Every entry into a namespace goes through [Do]; the link plumbing of
// [SetupNode] and [SetupPod] is computed as a list of steps first and then applied by a
// small kernel interface, so the logic is unit-tested with a recording fake and the real
// thing is tested in throwaway namespaces.
package netns
