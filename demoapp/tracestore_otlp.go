package demoapp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
)

// serveOTLPTraces is Jaeger's OTLP receiver (jaegertracing/all-in-one takes OTLP on 4317
// over gRPC and 4318 over HTTP and stores the spans): it serves OTLP trace exports on
// the gRPC and HTTP listeners until ctx ends, handing each export's spans to deliver as
// Zipkin v2 JSON. Package demoapp/otelcol sets it: it brings gRPC and OTLP's types,
// which the small meshlab-app binary does not link.
var serveOTLPTraces func(ctx context.Context, grpcLn, httpLn net.Listener, deliver func(zipkinJSON []byte) error, log *slog.Logger) error

// RegisterOTLPTraceReceiver makes the jaeger persona take OTLP with serve (package
// demoapp/otelcol calls it when linked); serve owns the listeners.
func RegisterOTLPTraceReceiver(serve func(ctx context.Context, grpcLn, httpLn net.Listener, deliver func(zipkinJSON []byte) error, log *slog.Logger) error) {
	serveOTLPTraces = serve
}

// startOTLPTraceReceiver serves OTLP on lns (4317, 4318) into store in a goroutine whose
// error goes to errc; the channel it returns is closed when it is done. Without a
// receiver linked the listeners are closed, which is logged, and it returns nil.
func startOTLPTraceReceiver(ctx context.Context, lns []net.Listener, store *spanStore, errc chan<- error, log *slog.Logger) <-chan struct{} {
	if serveOTLPTraces == nil {
		closeAll(lns)
		log.Warn("jaeger: no OTLP receiver in this binary (meshlab app has one): 4317 and 4318 closed")
		return nil
	}
	deliver := func(b []byte) error {
		var spans []zipkinSpan
		if err := json.Unmarshal(b, &spans); err != nil {
			return fmt.Errorf("decode spans: %w", err)
		}
		store.add(spans)
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serveOTLPTraces(ctx, lns[0], lns[1], deliver, log); err != nil {
			errc <- err
		}
	}()
	return done
}
