package origdst

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func sockaddr4(port uint16, ip [4]byte) []byte {
	b := make([]byte, unix.SizeofSockaddrInet4)
	binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET)
	binary.BigEndian.PutUint16(b[2:4], port)
	copy(b[4:8], ip[:])
	return b
}

func sockaddr6(port uint16, ip [16]byte) []byte {
	b := make([]byte, unix.SizeofSockaddrInet6)
	binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET6)
	binary.BigEndian.PutUint16(b[2:4], port)
	copy(b[8:24], ip[:])
	return b
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    netip.AddrPort
		wantErr bool
	}{
		{name: "ipv4", in: sockaddr4(9080, [4]byte{10, 96, 0, 12}), want: netip.MustParseAddrPort("10.96.0.12:9080")},
		{name: "ipv4 in a larger buffer", in: append(sockaddr4(443, [4]byte{10, 244, 0, 5}), make([]byte, 12)...), want: netip.MustParseAddrPort("10.244.0.5:443")},
		{name: "ipv6", in: sockaddr6(15006, netip.MustParseAddr("fd00::5").As16()), want: netip.MustParseAddrPort("[fd00::5]:15006")},
		{name: "short", in: []byte{2}, wantErr: true},
		{name: "short ipv4", in: sockaddr4(1, [4]byte{})[:6], wantErr: true},
		{name: "short ipv6", in: sockaddr6(1, [16]byte{})[:20], wantErr: true},
		{name: "unknown family", in: make([]byte, 16), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decode(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("decode = %v, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("decode = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestNotRedirected: a plain loopback connection has no NAT entry, so the kernel says
// ENOENT and OriginalDst reports ErrNotRedirected. (The redirected case is tested for real
// in netns/capture, which owns the iptables rules.)
func TestNotRedirected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	_, err = OriginalDst(server.(*net.TCPConn))
	if err == nil {
		t.Skip("kernel returned an original destination for an un-NATed connection (conntrack without NAT?)")
	}
	if !errors.Is(err, ErrNotRedirected) {
		t.Fatalf("OriginalDst = %v, want ErrNotRedirected", err)
	}
}
