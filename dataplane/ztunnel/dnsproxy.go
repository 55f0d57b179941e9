package ztunnel

import "net"

// serveDNS serves the pod's DNS proxy on 127.0.0.1:15053 until the pod goes.
func (z *Ztunnel) serveDNS(p *pod, pc net.PacketConn, ln *net.TCPListener) {
	<-p.ctx.Done()
	_ = pc.Close()
	_ = ln.Close()
}
