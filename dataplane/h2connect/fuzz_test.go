package h2connect

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// seedFrames is a valid client's opening: SETTINGS, a CONNECT, DATA, a WINDOW_UPDATE,
// PING, RST_STREAM and GOAWAY.
func seedFrames() []byte {
	var b, hb bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	enc := hpack.NewEncoder(&hb)
	_ = enc.WriteField(hpack.HeaderField{Name: ":method", Value: "CONNECT"})
	_ = enc.WriteField(hpack.HeaderField{Name: ":authority", Value: "10.0.0.1:80"})
	_ = enc.WriteField(hpack.HeaderField{Name: "baggage", Value: "k=v"})
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	_ = fr.WriteData(1, false, []byte("hello"))
	_ = fr.WriteWindowUpdate(0, 100)
	_ = fr.WriteWindowUpdate(1, 100)
	_ = fr.WritePing(false, [8]byte{1})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true})
	_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
	_ = fr.WriteGoAway(3, http2.ErrCodeNo, nil)
	return b.Bytes()
}

// The server takes any bytes after the preface without panicking or hanging: it serves,
// answers or closes, and every stream's handler returns once the client is gone.
func FuzzServer(f *testing.F) {
	seed := seedFrames()
	f.Add(seed)
	f.Add(seed[:40])
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 8, 1, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		srv := &Server{Handler: echo, MaxConcurrentStreams: 4, StreamWindow: 1000, ConnWindow: 4000}
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ServeConn(context.Background(), server)
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		_ = client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = client.Write([]byte(http2.ClientPreface))
		_, _ = client.Write(in)
		_ = client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("server still serving 10 s after the client closed")
		}
	})
}
