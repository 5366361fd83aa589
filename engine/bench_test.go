package engine_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/engine"
)

// The engine's CPU per PutItem and GetItem on one Region, as an SDK sends
// them (a SigV4 Authorization header with its credential scope, the
// X-Amz-Target, a small item): "handler" calls ServeHTTP in the benchmark's
// goroutine and reports the process's CPU per request (cpu-ns/op: the
// engine's own work and its garbage collection; ns/op, wall time, counts
// whatever else the machine runs meanwhile); "http" sends
// each request over a loopback connection with a plain net/http client and
// reports the process's CPU per request (cpu-ns/op, client and server:
// the client's part is the same whatever the engine does). Compare two
// commits with alternate runs (docs/BENCHMARKS.md).

const benchAuth = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261126/us-east-1/dynamodb/aws4_request, " +
	"SignedHeaders=accept-encoding;amz-sdk-invocation-id;amz-sdk-request;content-length;content-type;host;x-amz-date;x-amz-target, " +
	"Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// benchItems is how many items the GetItem benchmarks read in turn.
const benchItems = 1000

// benchReq is one request the benchmarks send.
type benchReq struct{ target, body string }

var benchCreate = benchReq{"DynamoDB_20120810.CreateTable", `{"TableName":"bench","BillingMode":"PAY_PER_REQUEST",` +
	`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]}`}

func benchPut(i int) benchReq {
	return benchReq{"DynamoDB_20120810.PutItem",
		fmt.Sprintf(`{"TableName":"bench","Item":{"pk":{"S":"k%06d"},"v":{"N":"%d"},"pad":{"S":"0123456789abcdef0123456789abcdef"}}}`, i%benchItems, i)}
}

func benchGet(i int) benchReq {
	return benchReq{"DynamoDB_20120810.GetItem", fmt.Sprintf(`{"TableName":"bench","Key":{"pk":{"S":"k%06d"}}}`, i%benchItems)}
}

// nullWriter is a ResponseWriter that keeps the status and drops the body.
type nullWriter struct {
	h      http.Header
	status int
}

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) WriteHeader(status int)      { w.status = status }
func (w *nullWriter) Write(b []byte) (int, error) { return len(b), nil }

// SetReadDeadline stands for the connection's, as net/http's writer has
// one: without it every http.ResponseController call would allocate an
// error no server pays.
func (w *nullWriter) SetReadDeadline(time.Time) error { return nil }

// serve sends one request to eng in this goroutine and fails on any answer
// but 200.
func (q benchReq) serve(b *testing.B, eng http.Handler, r *http.Request, body *bytes.Reader, w *nullWriter) {
	body.Reset([]byte(q.body))
	r.Body, r.ContentLength = io.NopCloser(body), int64(len(q.body))
	r.Header["X-Amz-Target"] = []string{q.target}
	clear(w.h)
	w.status = 200
	eng.ServeHTTP(w, r)
	if w.status != 200 {
		b.Fatalf("%s: status %d", q.target, w.status)
	}
}

func benchEngine(b *testing.B) *engine.Engine {
	eng, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	r, body, w := benchRequest(), bytes.NewReader(nil), &nullWriter{h: http.Header{}}
	benchCreate.serve(b, eng, r, body, w)
	for i := range benchItems {
		benchPut(i).serve(b, eng, r, body, w)
	}
	return eng
}

func benchRequest() *http.Request {
	r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:8000/", nil)
	if err != nil {
		panic(err)
	}
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	r.Header.Set("Authorization", benchAuth)
	r.Header.Set("X-Amz-Date", "20261126T000000Z")
	return r
}

func BenchmarkPutItem(b *testing.B) { benchOp(b, benchPut) }

func BenchmarkGetItem(b *testing.B) { benchOp(b, benchGet) }

func benchOp(b *testing.B, req func(int) benchReq) {
	b.Run("handler", func(b *testing.B) {
		eng := benchEngine(b)
		reqs := make([]benchReq, benchItems)
		for i := range reqs {
			reqs[i] = req(i)
		}
		serveLoop(b, eng, reqs)
	})
	b.Run("http", func(b *testing.B) { benchHTTP(b, req) })
}

// benchHTTP sends the requests to an engine listening on loopback (the
// server the binary runs) over one keep-alive connection, and reports the
// process's CPU (user and system) per request.
func benchHTTP(b *testing.B, req func(int) benchReq) {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	b.Cleanup(func() { tr.CloseIdleConnections(); srv.Close() })
	client := &http.Client{Transport: tr}
	send := func(q benchReq) {
		hr, err := http.NewRequest(http.MethodPost, srv.Endpoint()+"/", strings.NewReader(q.body))
		if err != nil {
			b.Fatal(err)
		}
		hr.Header.Set("Content-Type", "application/x-amz-json-1.0")
		hr.Header.Set("Authorization", benchAuth)
		hr.Header.Set("X-Amz-Target", q.target)
		resp, err := client.Do(hr)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: status %d", q.target, resp.StatusCode)
		}
	}
	send(benchCreate)
	for i := range benchItems {
		send(benchPut(i))
	}
	reqs := make([]benchReq, benchItems)
	for i := range reqs {
		reqs[i] = req(i)
	}
	start := cpuTime()
	i := 0
	for b.Loop() {
		send(reqs[i%benchItems])
		i++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serveLoop serves reqs in turn through ServeHTTP in the benchmark's
// goroutine until the benchmark ends, reporting allocations and the
// process's CPU per request (cpu-ns/op).
func serveLoop(b *testing.B, eng http.Handler, reqs []benchReq) {
	r, body, w := benchRequest(), bytes.NewReader(nil), &nullWriter{h: http.Header{}}
	b.ReportAllocs()
	start := cpuTime()
	i := 0
	for b.Loop() {
		reqs[i%len(reqs)].serve(b, eng, r, body, w)
		i++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
