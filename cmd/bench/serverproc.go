package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
)

// serverProc is a DynamoDB-speaking server in a process of its own.
type serverProc struct {
	name     string
	cmd      *exec.Cmd
	endpoint string
	next     atomic.Int64 // the next PutItem key
	exited   chan struct{}
	// hc keeps its connections open between phases, so that no phase
	// pays for connection setup.
	hc *http.Client
}

// buildServers builds the archiver and the null server into dir.
func buildServers(ctx context.Context, dir string) (archiver, null string, err error) {
	archiver, null = filepath.Join(dir, "archiver"), filepath.Join(dir, "nullserver")
	for bin, pkg := range map[string]string{archiver: "./cmd/archiver", null: "./cmd/bench/nullserver"} {
		if err := benchkit.GoBuild(ctx, bin, pkg, nil); err != nil {
			return "", "", err
		}
	}
	return archiver, null, nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// hasFlag reports whether `bin sub --help` lists flag.
func hasFlag(ctx context.Context, bin, sub, flag string) bool {
	out, _ := exec.CommandContext(ctx, bin, sub, "--help").CombinedOutput()
	return bytes.Contains(out, []byte(" -"+strings.TrimLeft(flag, "-")+" ")) || bytes.Contains(out, []byte(" -"+strings.TrimLeft(flag, "-")+"\n"))
}

// startServerProc starts the command that command returns for a free
// loopback port and waits until it answers ListTables.
func startServerProc(ctx context.Context, name string, command func(port int) (*exec.Cmd, error)) (*serverProc, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	addr := loopback(port)
	cmd, err := command(port)
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	s := &serverProc{name: name, cmd: cmd, endpoint: "http://" + addr, exited: make(chan struct{}),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.post(ctx, "ListTables", []byte("{}"))
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("exited: %s", strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("did not come up in 60s: %v", err)
		}
	}
}

// stop interrupts the server (so that a CPU profile is written) and kills
// it if it has not exited 10 s later.
func (s *serverProc) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// cpuSeconds is the server's CPU time so far (user + system, all threads).
func (s *serverProc) cpuSeconds() (float64, error) {
	d, err := benchkit.ProcCPU(s.cmd.Process.Pid)
	return d.Seconds(), err
}

// measure runs one phase of call from benchClients clients for d and
// reads the server's CPU time around it.
func (s *serverProc) measure(ctx context.Context, d time.Duration, call func(ctx context.Context, r *rand.Rand) error) (phase, error) {
	benchkit.Settle()
	cpu0, err := s.cpuSeconds()
	if err != nil {
		return phase{}, err
	}
	var ops atomic.Int64
	start := time.Now()
	_, err = runClients(ctx, d, func(_, _ int, r *rand.Rand) error {
		if err := call(ctx, r); err != nil {
			return err
		}
		ops.Add(1)
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return phase{}, err
	}
	cpu1, err := s.cpuSeconds()
	if err != nil {
		return phase{}, err
	}
	n := float64(ops.Load())
	return phase{cpuPerOp: (cpu1 - cpu0) / n, rate: n / elapsed.Seconds()}, nil
}

// createTable creates the bench table (no stream, no index: dynalite has
// neither) and waits until it is ACTIVE (dynalite creates tables
// asynchronously, as DynamoDB does).
func (s *serverProc) createTable(ctx context.Context) error { return s.createTableWith(ctx, "") }

// streamSpec is the CreateTable member that turns a stream on with both
// images, for createTableWith.
const streamSpec = `"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"}`

// createTableWith is createTable with extra, when not empty, one more
// member of the CreateTable request (streamSpec).
func (s *serverProc) createTableWith(ctx context.Context, extra string) error {
	if extra != "" {
		extra = "," + extra
	}
	_, err := s.post(ctx, "CreateTable", []byte(`{"TableName":"cpu","BillingMode":"PAY_PER_REQUEST",`+
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],`+
		`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"}]`+extra+`}`))
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, err := s.post(ctx, "DescribeTable", []byte(`{"TableName":"cpu"}`))
		if err != nil {
			return err
		}
		if bytes.Contains(out, []byte(`"TableStatus":"ACTIVE"`)) {
			return nil
		}
	}
	return errors.New("table cpu not ACTIVE after 30s")
}

// putOne writes the next item: the same items, in the same order, on every
// server.
func (s *serverProc) putOne(ctx context.Context, _ *rand.Rand) error {
	k := s.next.Add(1) - 1
	body := fmt.Appendf(make([]byte, 0, 256), `{"TableName":"cpu","Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"}}}`,
		benchPartition(int(k)), k, payload, k*7)
	_, err := s.post(ctx, "PutItem", body)
	return err
}

// getOne reads one of the items written so far (every key below next
// less the writes that may have been in flight) and fails if it is missing.
func (s *serverProc) getOne(ctx context.Context, r *rand.Rand) error {
	n := min(s.next.Load()-benchClients, serverCPUGetKeys)
	if n <= 0 {
		return errors.New("no items written")
	}
	k := r.Int64N(n)
	body := fmt.Appendf(make([]byte, 0, 128), `{"TableName":"cpu","Key":{"pk":{"S":"%s"},"sk":{"N":"%d"}}}`, benchPartition(int(k)), k)
	out, err := s.post(ctx, "GetItem", body)
	if err == nil && !bytes.Contains(out, []byte(`"Item"`)) {
		err = fmt.Errorf("item %d missing: %s", k, out)
	}
	return err
}

// post sends one DynamoDB request with the headers of a signed one (dynalite
// refuses a request without them; no server here checks the signature) and
// returns the body of a 200 answer.
func (s *serverProc) post(ctx context.Context, op string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["X-Amz-Target"] = []string{"DynamoDB_20120810." + op}
	h["Content-Type"] = []string{"application/x-amz-json-1.0"}
	h["X-Amz-Date"] = []string{"20260101T000000Z"}
	h["Authorization"] = []string{"AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/dynamodb/aws4_request, " +
		"SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + strings.Repeat("0", 64)}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", op, resp.StatusCode, out)
	}
	return out, nil
}

// batchPut writes items from..to-1 with BatchWriteItem (25 a request) from
// benchClients clients: the items putOne writes, in bulk. An item handed
// back unprocessed is an error: every server must hold every item.
func (s *serverProc) batchPut(ctx context.Context, from, to int) error {
	return s.batchPutPayload(ctx, from, to, payload)
}

// batchPutPayload is batchPut with pad as the items' data attribute.
func (s *serverProc) batchPutPayload(ctx context.Context, from, to int, pad string) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, benchClients)
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b []byte
			for ctx.Err() == nil {
				base := int(next.Add(25) - 25)
				if base >= to {
					return
				}
				b = append(b[:0], `{"RequestItems":{"cpu":[`...)
				for k := base; k < min(base+25, to); k++ {
					if k > base {
						b = append(b, ',')
					}
					b = fmt.Appendf(b, `{"PutRequest":{"Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"}}}}`,
						benchPartition(k), k, pad, k*7)
				}
				b = append(b, "]}}"...)
				out, err := s.post(ctx, "BatchWriteItem", b)
				if err == nil && bytes.Contains(out, []byte(`"PutRequest"`)) {
					err = fmt.Errorf("items handed back unprocessed: %.200s", out)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}
