package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/restore/restoretest"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/subscribe"
)

// TestTailSince archives 500 expiries (and the 500 puts before them)
// through the real NATS sink into a stream on an in-process nats-server,
// then runs `archiver tail --since 1h --subject` through dispatch until it
// printed all 500, and stops it as SIGINT does (its context ends): exit
// 0, every expiry once as a JSON line, and no consumer left on the
// stream.
func TestTailSince(t *testing.T) {
	const n = tailExpiries
	addr := tailStream(t)

	pr, pw := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- dispatch(ctx, []string{"tail", "--nats", "nats://" + addr, "--stream", "TAIL", "--since", "1h", "--subject", "TAIL.orders.expired"},
			env{stdout: pw, stderr: &stderr, getenv: envMap(nil)})
		pw.Close()
	}()
	seen := map[string]bool{}
	sc := bufio.NewScanner(pr)
	for len(seen) < n && sc.Scan() {
		var l tailLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if l.Kind != "expired" || l.Table != "orders" || l.TTLAttribute != "expires" || l.Time == nil || l.TTLLagSeconds == nil ||
			l.DeletedBy != event.DeletedByTTL || !strings.Contains(string(l.Keys), `"pk":{"S":"user#`) || seen[l.EventID] {
			t.Fatalf("line %s", sc.Text())
		}
		seen[l.EventID] = true
	}
	stop() // what SIGINT does to the command's context
	go io.Copy(io.Discard, pr)
	select {
	case c := <-code:
		if c != 0 || len(seen) != n {
			t.Fatalf("exit %d after %d expiries; stderr: %s", c, len(seen), stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("tail did not stop within a minute of its context's end")
	}
	if consumers := streamConsumers(t, addr, "TAIL"); consumers != 0 {
		t.Fatalf("tail left %d consumers on the stream", consumers)
	}
}

// tailExpiries is how many items expire in the tail tests.
const tailExpiries = 500

// tailStream expires tailExpiries items of table "orders" in an engine
// over HTTP and archives the stream's records (the puts and the expiries)
// through the real NATS sink into stream TAIL (subjects TAIL.TABLE.KIND)
// on an in-process nats-server, whose host:port it returns.
func tailStream(t *testing.T) string {
	t.Helper()
	bed := restoretest.Start(t, engine.Options{})
	bed.CreateTable("orders", "expires", st.StreamViewTypeNewAndOldImages)
	bed.PutExpiring("orders", tailExpiries)
	bed.ExpireAll()
	addr := natstest.Start(t).Addr()
	sk, _, err := sinks.Open(bed.Ctx, "nats://"+addr+"?subject=TAIL.{table}.{kind}&create-stream=TAIL", sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bed.ArchiveTo(sk, "orders", "expires")
	return addr
}

// TestTailSIGINT runs the built binary with stdout to a file (not a
// terminal: JSON lines) until it printed every expiry, then sends SIGINT:
// it exits 0.
func TestTailSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary (-short)")
	}
	addr := tailStream(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "archiver")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := os.Create(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "tail", "--nats", "nats://"+addr, "--stream", "TAIL", "--since", "1h", "--subject", "TAIL.*.expired")
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	lines := func() int {
		data, _ := os.ReadFile(out.Name())
		return bytes.Count(data, []byte("\n"))
	}
	eventually.True(t, 2*time.Minute, "tail to print every expiry", func() bool { return lines() >= tailExpiries })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || lines() != tailExpiries {
			t.Fatalf("exit: %v after %d lines; stderr: %s", err, lines(), stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("tail did not exit within a minute of SIGINT")
	}
}

// TestTailNew: without --since, tail prints only what arrives after it
// started, not the 500 expiries the stream already holds.
func TestTailNew(t *testing.T) {
	addr := tailStream(t)
	var out, stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	code := make(chan int, 1)
	go func() {
		code <- dispatch(ctx, []string{"tail", "--nats", "nats://" + addr, "--stream", "TAIL", "--json"},
			env{stdout: &out, stderr: &stderr, getenv: envMap(nil)})
	}()
	eventually.True(t, time.Minute, "tail's consumer", func() bool { return streamConsumers(t, addr, "TAIL") == 1 })
	publishExpiry(t, addr, "TAIL", "late-1")
	eventually.True(t, time.Minute, "the late expiry", func() bool { return strings.Contains(out.String(), "\n") })
	stop()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d; stderr: %s", c, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"eventID":"late-1"`) {
		t.Fatalf("tail printed %q, want the late expiry alone", out.String())
	}
}

func streamConsumers(t *testing.T, addr, stream string) int {
	t.Helper()
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

func TestTailFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--stream", "S"}, "--nats: required"},
		{[]string{"--nats", "http://h:4222", "--stream", "S"}, "--nats: \"http://h:4222\": want nats://"},
		{[]string{"--nats", "h:4222", "--stream", "S"}, "--nats: \"h:4222\": want nats://"},
		{[]string{"--nats", "nats://h1:4222,http://h2:4222", "--stream", "S"}, "--nats: \"http://h2:4222\": want nats://"},
		{[]string{"--nats", "nats://alice:hunter2@h:4222", "--stream", "a.b"}, "--stream: \"a.b\""},
		{[]string{"--nats", "nats://h:4222"}, "--stream: \"\""},
		{[]string{"--nats", "nats://h:4222", "--stream", "S", "--since", "-1h"}, "--since: \"-1h\" is not a time"},
		{[]string{"--nats", "nats://h:4222", "--stream", "S", "--since", "yesterday"}, "--since: \"yesterday\""},
		{[]string{"--nats", "nats://h:4222", "--stream", "S", "--subject", "a..b"}, "--subject: \"a..b\""},
		{[]string{"--nats", "nats://h:4222", "--stream", "S", "--subject", "a.>.b"}, "--subject: \"a.>.b\""},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			var stderr bytes.Buffer
			code := dispatch(t.Context(), append([]string{"tail"}, tt.args...), env{stdout: io.Discard, stderr: &stderr, getenv: envMap(nil)})
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q, want 2 and %q", code, stderr.String(), tt.want)
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Fatalf("the password is in %q", stderr.String())
			}
		})
	}
}

// TestTailConnectErrorRedacted: a server that is not there is an error
// naming --nats, without the URL's password.
func TestTailConnectErrorRedacted(t *testing.T) {
	var stderr bytes.Buffer
	code := dispatch(t.Context(), []string{"tail", "--nats", "nats://alice:hunter2@127.0.0.1:1", "--stream", "S"},
		env{stdout: io.Discard, stderr: &stderr, getenv: envMap(nil)})
	if code != 1 || !strings.Contains(stderr.String(), "--nats nats://alice:") || strings.Contains(stderr.String(), "hunter2") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestTailLine is the terminal's line for what each format carries.
func TestTailLine(t *testing.T) {
	del := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	pub := del.Add(2 * time.Second)
	keys := map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "a b\n"}, "sk": &ddb.AttributeValueMemberN{Value: "7"}}
	tests := []struct {
		name string
		ev   subscribe.Event
		want string
	}{
		{"envelope", subscribe.Event{Table: "orders", Kind: event.Expired, Keys: keys, Time: del, TTLTime: del.Add(-90 * time.Second), TTLLag: 90 * time.Second, DeletedBy: event.DeletedByTTL},
			"2026-03-04T05:06:07.000Z  expired  orders  pk=\"a b\\n\" sk=7  ttl 2026-03-04T05:04:37Z  lag 1m30s  by dynamodb-ttl\n"},
		{"item format", subscribe.Event{Table: "orders", Kind: event.Deleted, Keys: map[string]ddb.AttributeValue{"id": &ddb.AttributeValueMemberB{Value: []byte{1, 2}}}, DeletedBy: event.DeletedByOther},
			"2026-03-04T05:06:09.000Z  deleted  orders  id=AQI=  ttl -  lag -  by other\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &tailPrinter{out: &out, tty: true}
			if err := p.line(tt.ev, pub); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("%q\nwant %q", out.String(), tt.want)
			}
		})
	}
}

// publishExpiry publishes one expiry with event ID id through the real
// NATS sink on subject STREAM.orders.expired (creating the stream), and
// waits for its PubAck.
func publishExpiry(t *testing.T, addr, stream, id string) {
	t.Helper()
	sk, _, err := sinks.Open(t.Context(), "nats://"+addr+"?subject="+stream+".{table}.{kind}&create-stream="+stream, sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := event.Item{"pk": &st.AttributeValueMemberS{Value: id}, "sk": &st.AttributeValueMemberN{Value: "1"}}
	ev := event.Event{Kind: event.Expired, Table: "orders", EventID: id, EventName: "REMOVE", ShardID: "s", SequenceNumber: "9",
		DeletedBy: event.DeletedByTTL, Keys: keys, OldImage: keys, ApproximateCreationTime: time.Unix(1e9, 0)}
	acked := make(chan error, 1)
	if err := sk.Write(t.Context(), sinks.Batch{ShardID: "s", Events: []event.Event{ev}}, func(err error) { acked <- err }); err != nil {
		t.Fatal(err)
	}
	if err := sk.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if err := sk.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestTailUnreadable: a message tail cannot decode is reported on stderr
// with its stream sequence and subject, and tail goes on to the next; a
// stream that does not exist is an error naming --stream.
func TestTailUnreadable(t *testing.T) {
	addr := natstest.Start(t).Addr()
	publishExpiry(t, addr, "T", "first")
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "T.orders.expired", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	publishExpiry(t, addr, "T", "last")

	var out, stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	code := make(chan int, 1)
	go func() {
		code <- dispatch(ctx, []string{"tail", "--nats", "nats://" + addr, "--stream", "T", "--since", "1h"},
			env{stdout: &out, stderr: &stderr, getenv: envMap(nil)})
	}()
	eventually.True(t, time.Minute, "the last expiry", func() bool { return strings.Contains(out.String(), `"eventID":"last"`) })
	stop()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d; stderr: %s", c, stderr.String())
	}
	if !strings.Contains(out.String(), `"eventID":"first"`) || strings.Count(out.String(), "\n") != 2 {
		t.Fatalf("stdout %q, want the two expiries", out.String())
	}
	if want := "archiver tail: message 2 on T.orders.expired: subscribe: header Nats-Msg-Id: missing\n"; stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}

	var errOut bytes.Buffer
	c := dispatch(t.Context(), []string{"tail", "--nats", "nats://" + addr, "--stream", "NOPE"}, env{stdout: io.Discard, stderr: &errOut, getenv: envMap(nil)})
	if c != 1 || !strings.Contains(errOut.String(), "--stream NOPE: ") {
		t.Fatalf("unknown stream: exit %d, stderr %q", c, errOut.String())
	}
}

// TestTailHeaders: with --headers every header of a real sink's message
// is printed: in JSON as the "headers" object (Nats-Msg-Id and the
// Archiver- headers as sent), on a terminal indented under its line, a
// hostile value quoted so it cannot forge a line.
func TestTailHeaders(t *testing.T) {
	addr := natstest.Start(t).Addr()
	publishExpiry(t, addr, "H", "with-headers")
	var out, stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	code := make(chan int, 1)
	go func() {
		code <- dispatch(ctx, []string{"tail", "--nats", "nats://" + addr, "--stream", "H", "--since", "1h", "--headers"},
			env{stdout: &out, stderr: &stderr, getenv: envMap(nil)})
	}()
	eventually.True(t, time.Minute, "the expiry", func() bool { return strings.Contains(out.String(), "\n") })
	stop()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d; stderr: %s", c, stderr.String())
	}
	var l tailLine
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &l); err != nil {
		t.Fatal(err)
	}
	if l.Headers.Get(natsmsg.HeaderMsgID) != l.MessageID || l.Headers.Get(natsmsg.HeaderTable) != "orders" || l.Headers.Get(natsmsg.HeaderKind) != "expired" {
		t.Errorf("headers %v: want Nats-Msg-Id, Archiver-Table and Archiver-Kind as sent", l.Headers)
	}

	var tty bytes.Buffer
	p := &tailPrinter{out: &tty, tty: true, headers: true}
	if err := p.headerLines(nats.Header{"Archiver-Table": {"orders"}, "X-Evil": {"a\n2026-01-01T00:00:00.000Z  expired  forged"}}); err != nil {
		t.Fatal(err)
	}
	if want := "    Archiver-Table: orders\n    X-Evil: \"a\\n2026-01-01T00:00:00.000Z  expired  forged\"\n"; tty.String() != want {
		t.Errorf("%q\nwant %q", tty.String(), want)
	}
}
