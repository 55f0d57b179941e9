package inpod

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/netns"
)

// A new pod's rules replayed over netlink.
//
// iptables here is iptables-nft: iptables-restore turns its input into one nf_tables
// transaction (a netlink batch) and exits. Every new ambient pod gets the same input
// (istio-cni's chains and the pod's cluster-DNS rule do not depend on the pod), so the
// process, ~20 ms of CPU per pod on this kind of machine, does the same work every time.
// replays runs iptables-restore for the first pod only, reads back from the kernel the
// tables, chains and rules it made there, and sends later pods that ruleset as one
// nf_tables batch from the lab itself. The kernel then holds the same objects
// (expressions, comments in the rules' user data, iptables-nft's table marker), so
// iptables-save, iptables -L -v and their counters inside the pod read exactly as after
// iptables-restore; TestInstallNewReplayRealKernel compares them.
//
// It falls back to iptables-restore whenever it cannot be sure: the first pod's namespace
// already had nf_tables objects of that family (then what it holds is not only the
// input's), nothing was made in nf_tables (iptables-legacy), or a replay fails (the batch
// is one transaction: a failed one leaves nothing behind, and iptables-restore then says
// why).

// replays holds the recorded batch of each (family, iptables-restore input).
type replays struct {
	mu sync.Mutex
	m  map[replayKey]*replay
}

type replayKey struct {
	f    Family
	text string
}

type replay struct {
	msgs      [][]byte // the batch's messages; nil until recorded
	recording bool     // a pod's namespace is being recorded
	off       bool     // recording found nothing to replay: always run iptables-restore
	replayed  int      // namespaces that got msgs (for tests)
}

func newReplays() *replays { return &replays{m: map[replayKey]*replay{}} }

// installNew installs text, iptables-restore --noflush input of family f, in the new
// namespace ns.
func (r *replays) installNew(ns string, f Family, text string) error {
	key := replayKey{f, text}
	r.mu.Lock()
	e := r.m[key]
	if e == nil {
		e = &replay{}
		r.m[key] = e
	}
	msgs, record := e.msgs, false
	if msgs == nil && !e.recording && !e.off {
		e.recording, record = true, true
	}
	r.mu.Unlock()
	if msgs != nil {
		if err := netns.Do(ns, func() error { return sendBatch(msgs) }); err == nil {
			r.mu.Lock()
			e.replayed++
			r.mu.Unlock()
			return nil
		}
	}
	if !record {
		_, err := runIn(ns, text, restoreCmd(f), "--noflush")
		return err
	}
	var recorded [][]byte
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		e.recording, e.msgs, e.off = false, recorded, recorded == nil
	}()
	var empty bool
	err := netns.Do(ns, func() (err error) { empty, err = emptyRuleset(f); return err })
	if err != nil {
		empty = false
	}
	if _, err := runIn(ns, text, restoreCmd(f), "--noflush"); err != nil {
		return err
	}
	if empty {
		_ = netns.Do(ns, func() (err error) { recorded, err = rulesetBatch(f); return err })
	}
	return nil
}

// Netlink and nf_tables values the x/sys package does not name.
const (
	nfnetlinkV0 = 0

	nftaTableName, nftaTableFlags, nftaTableUserdata = 1, 2, 6

	nftaChainTable, nftaChainName, nftaChainHook, nftaChainPolicy = 1, 3, 4, 5
	nftaChainType, nftaChainCounters, nftaChainUserdata           = 7, 8, 12

	nftaRuleTable, nftaRuleChain, nftaRuleExpressions = 1, 2, 4
	nftaRuleCompat, nftaRuleUserdata                  = 5, 7

	nftaCounterBytes, nftaCounterPackets = 1, 2

	nftaRuleCompatProto, nftaRuleCompatFlags, nftRuleCompatInv = 1, 2, 1 << 1

	nftaMetaDreg, nftaMetaKey, nftMetaL4proto = 1, 2, 16
	nftaCmpSreg, nftaCmpOp, nftaCmpData       = 1, 2, 3
	nftCmpNeq                                 = 1
	nftaDataValue                             = 1

	nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
)

func nfproto(f Family) uint8 {
	if f == IPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

func nftType(msg int) uint16 { return uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | msg) }

// dialNetfilter opens a netfilter netlink socket in the calling thread's namespace.
func dialNetfilter() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return -1, fmt.Errorf("netfilter netlink socket: %w", err)
	}
	// The kernel answers at once; the timeout only keeps a lost answer from hanging a pod.
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind netfilter netlink socket: %w", err)
	}
	return fd, nil
}

// message is a netlink message with nfnetlink's header (family, version, resource id).
func message(typ, flags uint16, seq uint32, family uint8, resID uint16, attrs []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+4, unix.NLMSG_HDRLEN+4+len(attrs))
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)+len(attrs)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b[16], b[17] = family, nfnetlinkV0
	binary.BigEndian.PutUint16(b[18:], resID)
	return append(b, attrs...)
}

type attr struct {
	typ  uint16 // with its flags
	data []byte
}

func parseAttrs(b []byte) []attr {
	var as []attr
	for len(b) >= unix.SizeofNlAttr {
		n := int(binary.NativeEndian.Uint16(b))
		if n < unix.SizeofNlAttr || n > len(b) {
			break
		}
		as = append(as, attr{binary.NativeEndian.Uint16(b[2:]), b[unix.SizeofNlAttr:n]})
		b = b[min(nlaAlign(n), len(b)):]
	}
	return as
}

func nlaAlign(n int) int { return (n + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1) }

func putAttr(b []byte, typ uint16, data []byte) []byte {
	n := unix.SizeofNlAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	return append(b, make([]byte, nlaAlign(n)-n)...)
}

// zeroCounters is a counter's attributes (an expression's or a base chain's) at zero: the
// recorded pod's packets are not the new pod's.
func zeroCounters() []byte {
	var zero [8]byte
	return putAttr(putAttr(nil, nftaCounterBytes, zero[:]), nftaCounterPackets, zero[:])
}

// request sends one request and returns the nfnetlink payloads of its answers, up to
// NLMSG_DONE for a dump or the acknowledgement otherwise.
func request(fd int, msg []byte) ([][]byte, error) {
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out [][]byte
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		ms, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if err := ackError(m.Data); err != nil {
					return nil, err
				}
				return out, nil
			}
			if len(m.Data) < 4 {
				return nil, errors.New("short nfnetlink message")
			}
			out = append(out, append([]byte(nil), m.Data[4:]...))
		}
	}
}

// ackError is the error an NLMSG_ERROR message carries, nil for an acknowledgement.
func ackError(data []byte) error {
	if len(data) < 4 {
		return errors.New("short netlink error message")
	}
	if errno := -int32(binary.NativeEndian.Uint32(data)); errno != 0 {
		return syscall.Errno(errno)
	}
	return nil
}

func dump(fd int, f Family, msg int) ([][]byte, error) {
	return request(fd, message(nftType(msg), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, 1, nfproto(f), 0, nil))
}

// emptyRuleset reports whether the calling thread's namespace has no nf_tables table of
// family f.
func emptyRuleset(f Family) (bool, error) {
	fd, err := dialNetfilter()
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	tables, err := dump(fd, f, unix.NFT_MSG_GETTABLE)
	return len(tables) == 0, err
}

// rulesetBatch reads the tables, chains and rules of family f in the calling thread's
// namespace and returns the messages that make them again in a namespace without them:
// each object as the kernel lists it, less what the kernel assigns (handles, use counts,
// flags it derives) and with counters at zero, in the kernel's order so that chains and
// rules keep theirs. nil when there is nothing.
func rulesetBatch(f Family) ([][]byte, error) {
	fd, err := dialNetfilter()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	kinds := []struct {
		get, make int
		flags     uint16
		keep      func(attr) ([]byte, bool)
	}{
		{unix.NFT_MSG_GETTABLE, unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE | unix.NLM_F_EXCL, keepTableAttr},
		{unix.NFT_MSG_GETCHAIN, unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE | unix.NLM_F_EXCL, keepChainAttr},
		{unix.NFT_MSG_GETRULE, unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE | unix.NLM_F_APPEND, keepRuleAttr},
	}
	var msgs [][]byte
	for _, k := range kinds {
		objs, err := dump(fd, f, k.get)
		if err != nil {
			return nil, fmt.Errorf("list nf_tables objects (%d): %w", k.get, err)
		}
		for _, obj := range objs {
			var attrs []byte
			for _, a := range parseAttrs(obj) {
				if data, ok := k.keep(a); ok {
					attrs = putAttr(attrs, a.typ, data)
				}
				if k.make == unix.NFT_MSG_NEWRULE && a.typ&nlaTypeMask == nftaRuleExpressions {
					attrs = putAttr(attrs, unix.NLA_F_NESTED|nftaRuleCompat, ruleCompat(a.data))
				}
			}
			msgs = append(msgs, message(nftType(k.make), unix.NLM_F_REQUEST|unix.NLM_F_ACK|k.flags, 0, nfproto(f), 0, attrs))
		}
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	return msgs, nil
}

func keepTableAttr(a attr) ([]byte, bool) {
	switch a.typ & nlaTypeMask {
	case nftaTableName, nftaTableFlags, nftaTableUserdata:
		return a.data, true
	}
	return nil, false
}

func keepChainAttr(a attr) ([]byte, bool) {
	switch a.typ & nlaTypeMask {
	case nftaChainTable, nftaChainName, nftaChainHook, nftaChainPolicy, nftaChainType, nftaChainUserdata:
		return a.data, true
	case nftaChainCounters: // a base chain counts what its policy decides
		return zeroCounters(), true
	}
	return nil, false
}

func keepRuleAttr(a attr) ([]byte, bool) {
	switch a.typ & nlaTypeMask {
	case nftaRuleTable, nftaRuleChain, nftaRuleUserdata:
		return a.data, true
	case nftaRuleExpressions:
		var exprs []byte
		for _, elem := range parseAttrs(a.data) {
			data := elem.data
			if isCounter(elem.data) {
				data = putAttr(putAttr(nil, unix.NFTA_EXPR_NAME, []byte("counter\x00")), unix.NLA_F_NESTED|unix.NFTA_EXPR_DATA, zeroCounters())
			}
			exprs = putAttr(exprs, elem.typ, data)
		}
		return exprs, true
	}
	return nil, false
}

// ruleCompat is the rule's compat attribute, which the kernel does not list: the
// protocol of iptables' -p (iptables-nft writes it to every rule, as a meta l4proto
// comparison and this attribute), which an xtables match or target of the rule may
// require (`-m tcp` alone needs tcp). The kernel keeps it for those checks only, so it
// shows nowhere.
func ruleCompat(exprs []byte) []byte {
	var proto, flags uint32
	var l4reg []byte // the register a meta l4proto loaded, until the comparison that reads it
	for _, elem := range parseAttrs(exprs) {
		var name string
		var data []attr
		for _, a := range parseAttrs(elem.data) {
			switch a.typ & nlaTypeMask {
			case unix.NFTA_EXPR_NAME:
				name = string(a.data)
			case unix.NFTA_EXPR_DATA:
				data = parseAttrs(a.data)
			}
		}
		get := func(typ uint16) []byte {
			for _, a := range data {
				if a.typ&nlaTypeMask == typ {
					return a.data
				}
			}
			return nil
		}
		switch name {
		case "meta\x00":
			if key := get(nftaMetaKey); len(key) == 4 && binary.BigEndian.Uint32(key) == nftMetaL4proto {
				l4reg = get(nftaMetaDreg)
			}
			continue
		case "cmp\x00":
			value := parseAttrs(get(nftaCmpData))
			if l4reg != nil && string(get(nftaCmpSreg)) == string(l4reg) && len(value) == 1 &&
				value[0].typ&nlaTypeMask == nftaDataValue && len(value[0].data) >= 1 {
				proto = uint32(value[0].data[0])
				if op := get(nftaCmpOp); len(op) == 4 && binary.BigEndian.Uint32(op) == nftCmpNeq {
					flags = nftRuleCompatInv
				}
				return compatAttrs(proto, flags)
			}
		}
		l4reg = nil
	}
	return compatAttrs(proto, flags)
}

func compatAttrs(proto, flags uint32) []byte {
	return putAttr(putAttr(nil, nftaRuleCompatProto, binary.BigEndian.AppendUint32(nil, proto)),
		nftaRuleCompatFlags, binary.BigEndian.AppendUint32(nil, flags))
}

// isCounter reports whether an expression's attributes are a counter's.
func isCounter(expr []byte) bool {
	for _, a := range parseAttrs(expr) {
		if a.typ&nlaTypeMask == unix.NFTA_EXPR_NAME {
			return string(a.data) == "counter\x00"
		}
	}
	return false
}

// sendBatch sends msgs as one nf_tables transaction in the calling thread's namespace and
// waits for the kernel to acknowledge every message; on an error nothing of it is
// applied.
func sendBatch(msgs [][]byte) error {
	fd, err := dialNetfilter()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	seq := uint32(1)
	b := message(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, seq, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)
	for _, m := range msgs {
		seq++
		start := len(b)
		b = append(b, m...)
		binary.NativeEndian.PutUint32(b[start+8:], seq)
	}
	b = append(b, message(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, seq+1, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)...)
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send nf_tables batch: %w", err)
	}
	buf := make([]byte, 1<<16)
	for acked := 0; acked < len(msgs); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("read nf_tables batch answer: %w", err)
		}
		ms, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			if err := ackError(m.Data); err != nil {
				return fmt.Errorf("nf_tables batch message %d: %w", m.Header.Seq-1, err)
			}
			acked++
		}
	}
	return nil
}
