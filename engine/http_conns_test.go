package engine_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
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

// rawConn is a client connection to srv that speaks HTTP/1.1 by hand.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, srv *engine.Server) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.Endpoint(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A safety net against a hang, not a timing assertion.
	c.SetDeadline(time.Now().Add(time.Minute))
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// send writes s and fails the test on error.
func (c *rawConn) send(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// response reads one response and its body.
func (c *rawConn) response(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// closedByServer reports whether the server has closed the connection.
func (c *rawConn) closedByServer() bool {
	_, err := c.r.ReadByte()
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

const healthRequest = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

// TestSlowBodyCutOff: a body trickling in at one byte at a time is cut off
// once the body timeout has passed, on the DynamoDB API and on the control
// API: 408 naming the timeout, and the connection closed. The client
// never finishes (it announced a megabyte), so without a timeout the test
// would hang.
func TestSlowBodyCutOff(t *testing.T) {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, BodyTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, c := range []struct {
		name, head, want string
	}{
		{"api", "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\nContent-Length: 1048576\r\n\r\n", "RequestTimeoutException"},
		{"control", "POST /_engine/ttl/sweep HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n", `"error"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dialRaw(t, srv)
			conn.send(t, c.head)
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := conn.Write([]byte{' '}); err != nil {
						return
					}
				}
			}()
			code, body := conn.response(t)
			if code != http.StatusRequestTimeout || !strings.Contains(body, c.want) || !strings.Contains(body, "--body-timeout") {
				t.Fatalf("%d %s, want 408 %s naming --body-timeout", code, body, c.want)
			}
			if !conn.closedByServer() {
				t.Fatal("the connection stayed open after the body timed out")
			}
		})
	}
}

// TestStalledBodiesAllocateWhatArrived: 300 connections each announce a
// 1 MiB body and send none of it. The engine's buffers grow with the bytes
// that arrive, so the heap grows by a few KiB per connection, not by the
// 300 MiB announced.
func TestStalledBodiesAllocateWhatArrived(t *testing.T) {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() }) // after the clients' connections close
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const n = 300
	for i := 0; i < n; i++ {
		conn := dialRaw(t, srv)
		conn.send(t, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\nContent-Length: 1048576\r\n\r\n{")
	}
	for srv.Engine().BodiesInReadForTest() < n {
		time.Sleep(10 * time.Millisecond) // until every handler waits for its body
	}
	after := heap()
	grew := int64(after) - int64(before)
	t.Logf("%d stalled announcements: heap grew by %d KiB", n, grew>>10)
	if grew > 48<<20 {
		t.Fatalf("%d stalled 1 MiB announcements grew the heap by %d MiB; want the buffers to hold only what arrived", n, grew>>20)
	}
}

// TestConnectionCap: beyond MaxConns, a new connection closes the one that
// has waited longest without a request in progress: idle keep-alive
// connections, and connections that never sent a byte; every new client is
// served, and the server never holds more than the cap.
func TestConnectionCap(t *testing.T) {
	const max = 4
	for _, c := range []struct {
		name string
		open func(t *testing.T, conn *rawConn)
	}{
		{"idle keep-alive", func(t *testing.T, conn *rawConn) {
			conn.send(t, healthRequest)
			if code, body := conn.response(t); code != 200 {
				t.Fatalf("first request: %d %s", code, body)
			}
		}},
		{"never sent a byte", func(t *testing.T, conn *rawConn) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, MaxConns: max})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			var old []*rawConn
			for i := 0; i < max; i++ {
				conn := dialRaw(t, srv)
				c.open(t, conn)
				old = append(old, conn)
			}
			// Every one of them is waiting before the new ones arrive.
			for open, idle := srv.ConnsForTest(); open < max || c.name == "idle keep-alive" && idle < max; open, idle = srv.ConnsForTest() {
				time.Sleep(10 * time.Millisecond)
			}
			for i := 0; i < max; i++ {
				conn := dialRaw(t, srv)
				conn.send(t, healthRequest)
				if code, body := conn.response(t); code != 200 {
					t.Fatalf("new connection %d: %d %s", i, code, body)
				}
				if open, _ := srv.ConnsForTest(); open > max {
					t.Fatalf("%d connections open, cap %d", open, max)
				}
			}
			for i, conn := range old {
				if !conn.closedByServer() {
					t.Fatalf("old connection %d still open after %d new ones", i, max)
				}
			}
		})
	}
}

// TestConnectionCapWaitsForActive: when every connection is in a request,
// a new one waits for room rather than closing one: the stalled request
// completes once its body arrives, and the new client is served after it.
func TestConnectionCapWaitsForActive(t *testing.T) {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() }) // after the clients' connections close
	busy := dialRaw(t, srv)
	busy.send(t, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 2\r\n\r\n{")
	for srv.Engine().BodiesInReadForTest() < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	waiting := dialRaw(t, srv)
	go func() {
		if _, err := io.WriteString(waiting, healthRequest); err != nil {
			done <- result{0, err.Error()}
			return
		}
		resp, err := http.ReadResponse(waiting.r, nil)
		if err != nil {
			done <- result{0, err.Error()}
			return
		}
		resp.Body.Close()
		done <- result{resp.StatusCode, ""}
	}()
	if open, _ := srv.ConnsForTest(); open != 1 {
		t.Fatalf("%d connections open while one is in a request, cap 1", open)
	}
	busy.send(t, "}")
	if code, body := busy.response(t); code != 200 || !strings.Contains(body, "TableNames") {
		t.Fatalf("the stalled request: %d %s, want its ListTables answer", code, body)
	}
	if r := <-done; r.code != 200 {
		t.Fatalf("the waiting client: %d %s", r.code, r.body)
	}
}
