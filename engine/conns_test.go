package engine_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/engine"
)

// TestShutdownDropsUnusedConnections: a connection a client opened and
// never used (an SDK's dial that lost a race) does not hold Shutdown back.
// net/http alone waits five seconds for such a connection; the engine
// closes it at once, so a Shutdown allowed three seconds succeeds.
func TestShutdownDropsUnusedConnections(t *testing.T) {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	unused, err := net.Dial("tcp", srv.Endpoint()[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer unused.Close()
	// The server accepts connections in order: once a later one has been
	// served, the unused one has been accepted too.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(srv.Endpoint() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with an unused connection open: %v", err)
	}
	unused.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := unused.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from the unused connection after Shutdown; want it closed", n)
	}
}
