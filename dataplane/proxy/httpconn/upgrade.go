package httpconn

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// requestedUpgrade returns the lower-case protocol an HTTP/1.1 request asks to upgrade
// to ("Connection: upgrade" and an Upgrade header), "" for none. An h2c upgrade is not
// one: Envoy's HTTP/1 codec drops its headers and serves the request as HTTP/1.1.
func requestedUpgrade(r *http.Request) string {
	if r.ProtoMajor != 1 {
		return ""
	}
	up := r.Header.Get("Upgrade")
	if up == "" || !connectionHas(r.Header, "upgrade") {
		return ""
	}
	up = strings.ToLower(strings.TrimSpace(up))
	if up == "h2c" {
		return ""
	}
	return up
}

func connectionHas(h http.Header, token string) bool {
	for _, v := range h.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// upgradeAllowed reports whether the route (which overrides the HCM per type) enables
// the upgrade, as Envoy's upgrade_configs.
func (rt *router) upgradeAllowed(route *Route, typ string) bool {
	if route != nil && route.Upgrades != nil {
		if on, ok := route.Upgrades[typ]; ok {
			return on
		}
	}
	return rt.cfg.Upgrades[typ]
}

// hijacker is the downstream HTTP/1 connection handed over after a 101.
type hijacker interface {
	Hijack() (net.Conn, *bufio.ReadWriter, error)
}

func unwrapHijacker(w http.ResponseWriter) (hijacker, bool) {
	for {
		if h, ok := w.(hijacker); ok {
			return h, true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil, false
		}
		w = u.Unwrap()
	}
}

// upgradedBody returns the upstream connection of a 101 response.
func upgradedBody(body io.ReadCloser) (io.ReadWriteCloser, bool) {
	for {
		if rw, ok := body.(io.ReadWriteCloser); ok {
			return rw, true
		}
		u, ok := body.(interface{ Unwrap() io.ReadCloser })
		if !ok {
			return nil, false
		}
		body = u.Unwrap()
	}
}

// tunnel completes an upgrade the upstream accepted: the 101 and its headers go
// downstream, then bytes flow both ways until each side has closed, as Envoy's router
// does for an upgraded stream; upgrade is the upstream's Upgrade field. It returns 101.
func (rt *router) tunnel(x *exchange, a attempt, h http.Header, upgrade string) int {
	resp := a.resp
	up, ok := upgradedBody(resp.Body)
	hj, hok := unwrapHijacker(x.w)
	if !ok || !hok {
		// HTTP/2 downstream (extended CONNECT is not implemented) or an upstream that
		// cannot be written to: the stream is reset, as Envoy resets a failed upgrade.
		x.info.CodeDetails = "upgrade_failed"
		if ab, ok := unwrapAborter(x.w); ok {
			ab.Abort()
		}
		return http.StatusSwitchingProtocols
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		x.info.CodeDetails = "upgrade_failed"
		return http.StatusSwitchingProtocols
	}
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	h.Set("Connection", "upgrade")
	h.Set("Upgrade", upgrade)
	if _, ok := h["Date"]; !ok {
		h["Date"] = []string{httpDate()}
	}
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	writeHeader(brw.Writer, h)
	_, _ = brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		_ = up.Close()
		return http.StatusSwitchingProtocols
	}
	x.info.CodeDetails = "via_upstream"
	x.bridge(conn, brw.Reader, up)
	return http.StatusSwitchingProtocols
}

// bridge carries a stream taken over from HTTP (an upgrade the upstream accepted, a
// CONNECT the proxy terminated) both ways until each side has ended, passing on each
// side's end as a half-close, and counts its bytes in x's stats. What the client sent
// after the request (already buffered in client) goes first. The client may still be
// sending after the upstream finished: it gets the time Envoy's drain of a half-closed
// stream allows, then both close.
func (x *exchange) bridge(conn net.Conn, client io.Reader, up io.ReadWriteCloser) {
	var wg sync.WaitGroup
	var received int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		received, _ = io.Copy(up, client)
		closeWrite(up)
	}()
	sent, _ := io.Copy(conn, up)
	closeWrite(conn)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(upgradeHalfCloseGrace):
	}
	_ = up.Close()
	_ = conn.Close()
	wg.Wait()
	x.w.n += sent
	if x.rx != nil {
		x.rx.n += received
	}
}

// upgradeHalfCloseGrace bounds how long an upgraded stream waits for the client's half
// once the upstream closed its own.
const upgradeHalfCloseGrace = 5 * time.Second

// closeWrite half-closes c when it can (the downstream TCP connection), else closes it
// (the upstream connection net/http hands over after a 101 hides its half-close): the
// other side then sees the end of the stream either way.
func closeWrite(c any) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	if cl, ok := c.(io.Closer); ok {
		_ = cl.Close()
	}
}

// upgradeHeaders puts the upgrade request headers back on the upstream request (the
// hop-by-hop removal took them off).
func upgradeHeaders(out *http.Request, upgrade string) {
	out.Header.Set("Connection", "upgrade")
	out.Header.Set("Upgrade", upgrade)
}
