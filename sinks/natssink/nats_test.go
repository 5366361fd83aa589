package natssink

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

func TestNATSJetStreamPublishesWithHeaders(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st := testkit.CreateStream(t, js, "TTL", "ttl.>")
	s, kinds, err := open(ctx, "nats://"+ns.URL+"?subject=ttl.{table}.{kind}.{pk}&events=expired,deleted", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if len(kinds) != 2 || s.Name() != "nats://"+ns.URL {
		t.Fatalf("kinds %v name %q", kinds, s.Name())
	}
	evs := testkit.Events("sessions", "shard-1", 1, 20)
	for i := range evs { // native expiries and swept ones (past-ttl)
		evs[i].DeletedBy = []string{event.DeletedByTTL, event.DeletedByOther}[i%2]
	}
	a := testkit.NewAcks()
	for i := 0; i < 4; i++ {
		if err := s.Write(ctx, sinkapi.Batch{ShardID: "shard-1", Events: evs[i*5 : i*5+5]}, a.Ack(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		if err := a.WaitAck(t, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	msgs := testkit.StreamMsgs(t, st)
	if len(msgs) != 20 {
		t.Fatalf("%d messages in the stream, want 20", len(msgs))
	}
	for i, m := range msgs {
		e := evs[i]
		wantSubj := "ttl.sessions.expired." + strings.ReplaceAll(e.Keys["pk"].(*types.AttributeValueMemberS).Value, ".", "_")
		if m.Subject() != wantSubj {
			t.Fatalf("message %d subject %q, want %q", i, m.Subject(), wantSubj)
		}
		for h, want := range map[string]string{
			"Nats-Msg-Id": event.MessageID(&e), HeaderTable: "sessions", HeaderKind: "expired", HeaderShard: "shard-1",
			HeaderSequence: e.SequenceNumber, HeaderKeys: string(event.MarshalItem(e.Keys)), HeaderEventName: "REMOVE",
			HeaderDeletedBy: e.DeletedBy, HeaderRegion: "us-east-1",
		} {
			if got := m.Headers().Get(h); got != want {
				t.Fatalf("message %d header %s = %q, want %q", i, h, got, want)
			}
		}
		got, err := event.DecodeLine(m.Data())
		if err != nil || !testkit.SameEvent(got, e) {
			t.Fatalf("message %d payload does not decode to the event (%v): %s", i, err, m.Data())
		}
	}
}

func TestNATSDeduplicatesByEventID(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st := testkit.CreateStream(t, js, "TTL", "archiver.>")
	s, _, err := open(ctx, "nats://"+ns.URL, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := testkit.Events("t", "s", 1, 10)
	a := testkit.NewAcks()
	// The same batch twice (a consumer retry after a crash).
	for _, id := range []string{"first", "again"} {
		if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack(id)); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitAck(t, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := testkit.StreamCount(t, st); n != 10 {
		t.Fatalf("stream holds %d messages, want 10 (duplicates dropped by Nats-Msg-Id)", n)
	}
}

func TestNATSNoStreamIsAStartupError(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "OTHER", "orders.>")
	_, _, err := open(ctx, "nats://"+ns.URL+"?subject=archiver.{table}.{kind}", sinkapi.Options{})
	if err == nil || !strings.Contains(err.Error(), `no JetStream stream captures "archiver.*.*"`) {
		t.Fatalf("Open error %v, want a no-stream error", err)
	}
}

func TestNATSCreateStream(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=exp.{table}&create-stream=EXPIRED&format=item", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	evs := testkit.Events("t1", "s", 1, 3)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Get("b"); n != 1 || err != nil {
		t.Fatalf("Close did not flush: %d %v", n, err)
	}
	st, err := js.Stream(ctx, "EXPIRED")
	if err != nil {
		t.Fatal(err)
	}
	msgs := testkit.StreamMsgs(t, st)
	if len(msgs) != 3 || msgs[0].Subject() != "exp.t1" || string(msgs[0].Data()) != string(event.PlainJSON(evs[0].OldImage)) {
		t.Fatalf("got %d messages; first %q %s", len(msgs), msgs[0].Subject(), msgs[0].Data())
	}
	// Opening again with the stream in place is fine.
	s2, _, err := open(ctx, "nats://"+ns.URL+"?subject=exp.{table}&create-stream=EXPIRED", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close(ctx)
}

func TestNATSCoreMode(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	nc, _ := ns.Client(t)
	sub, err := nc.SubscribeSync("core.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=core.{table}.{sk}&jetstream=false", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := testkit.Events("t", "s", 7, 2)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"core.t.7", "core.t.8"} {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != want || m.Header.Get("Nats-Msg-Id") != event.MessageID(&evs[i]) {
			t.Fatalf("got %q %v", m.Subject, m.Header)
		}
	}
}

// TestNATSServerDownMidStream stops the server for about ten seconds while
// batches flow, restarts it on the same port and store, and checks that
// every event arrives exactly once and every batch was acknowledged
// without error.
func TestNATSServerDownMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a server for 10s; skipped with -short")
	}
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "TTL", "archiver.>")
	s, _, err := open(ctx, "nats://"+ns.URL+"?max-pending-bytes=256KiB&max-in-flight=64", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const batches, per = 60, 25
	a := testkit.NewAcks()
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; i < batches; i++ {
			evs := testkit.Events("t", "s", i*per, per)
			if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack(fmt.Sprint(i))); err != nil {
				writerDone <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		writerDone <- nil
	}()
	eventually.True(t, 30*time.Second, "some batches acknowledged", func() bool { return len(a.All()) >= 5 })
	ready := s.(interface{ Ready() error })
	if err := ready.Ready(); err != nil {
		t.Fatalf("Ready while connected: %v", err)
	}
	ns.Stop()
	eventually.True(t, 30*time.Second, "unready while NATS is down", func() bool { return ready.Ready() != nil })
	time.Sleep(10 * time.Second) // the outage itself, not a wait for a condition
	ackedWhileDown := len(a.All())
	ns.Start()
	eventually.True(t, 30*time.Second, "ready once NATS is back", func() bool { return ready.Ready() == nil })
	if err := <-writerDone; err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < batches; i++ {
		if err := a.WaitAck(t, fmt.Sprint(i)); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, js2 := ns.Client(t)
	st, err := js2.Stream(ctx, "TTL")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range testkit.StreamMsgs(t, st) {
		seen[testkit.BodyEventID(t, m.Data())]++
	}
	for i := 0; i < batches*per; i++ {
		id := fmt.Sprintf("t-s-%d", i)
		if seen[id] != 1 {
			t.Fatalf("event %s stored %d times (acked while down: %d)", id, seen[id], ackedWhileDown)
		}
	}
	if len(seen) != batches*per {
		t.Fatalf("%d distinct events, want %d", len(seen), batches*per)
	}
}

func TestNATSAuth(t *testing.T) {
	dir := t.TempDir()
	seed, pub := newNKey(t)
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	ca, certFile, keyFile, caFile := newTLSFiles(t, dir)
	tests := []struct {
		name   string
		tweak  func(*server.Options)
		query  string
		badArg string // a query that must fail to connect
	}{
		{"token", func(o *server.Options) { o.Authorization = "s3cret" }, "token=s3cret", "token=wrong"},
		{"user", func(o *server.Options) { o.Users = []*server.User{{Username: "alice", Password: "pw"}} }, "user=alice&password=pw", "user=alice&password=nope"},
		{"nkey", func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} }, "nkey=" + seedFile, "token=x"},
		{"tls", func(o *server.Options) {
			cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: certFile, KeyFile: keyFile, CaFile: caFile, Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			o.TLSConfig = cfg
			o.TLS = true
			o.TLSVerify = true
		}, "tls-ca=" + caFile + "&tls-cert=" + certFile + "&tls-key=" + keyFile, "tls-ca=" + caFile},
	}
	_ = ca
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			ns := testkit.StartNATS(t, tc.tweak)
			u := "nats://" + ns.URL + "?subject=auth.{table}&create-stream=AUTH&" + tc.query
			s, _, err := open(ctx, u, sinkapi.Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 3)}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitAck(t, "b"); err != nil {
				t.Fatal(err)
			}
			s.Close(ctx)
			bad, _, err := open(ctx, "nats://"+ns.URL+"?subject=auth.{table}&"+tc.badArg, sinkapi.Options{})
			if err == nil {
				bad.Close(ctx)
				t.Fatal("Open with wrong credentials succeeded")
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}

func newNKey(t testing.TB) (seed []byte, pub string) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ = kp.Seed()
	pub, _ = kp.PublicKey()
	return seed, pub
}

// newTLSFiles makes a CA and a certificate for 127.0.0.1 signed by it
// (used by the server and as the client certificate).
func newTLSFiles(t testing.TB, dir string) (ca *x509.Certificate, certFile, keyFile, caFile string) {
	t.Helper()
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile = write("ca.pem", "CERTIFICATE", caDER)
	certFile = write("cert.pem", "CERTIFICATE", der)
	keyFile = write("key.pem", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	_ = tls.VersionTLS12
	return ca, certFile, keyFile, caFile
}

func TestSubjectTemplate(t *testing.T) {
	e := testkit.Events("my.table", "s", 1, 1)[0]
	e.Keys["pk"] = &types.AttributeValueMemberS{Value: "a b.c*d>e"}
	tests := []struct{ tmpl, want string }{
		{"archiver.{table}.{kind}", "archiver.my%2Etable.expired"},
		{"x.{pk}", "x.a%20b%2Ec%2Ad%3Ee"},
		{"x.{sk}", "x.1"},
		{"x.{missing}", "x._"},
		{"pre-{table}-post.{kind}", "pre-my%2Etable-post.expired"},
	}
	for _, tc := range tests {
		tmpl, err := parseSubject(tc.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		if got := tmpl.render(&e, 0); got != tc.want {
			t.Errorf("%s rendered %q, want %q", tc.tmpl, got, tc.want)
		}
	}
	if f := mustSubject(t, "a.{table}.b-{kind}.c").filter(); f != "a.*.*.c" {
		t.Errorf("filter %q", f)
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", "a.*", "a.>", "a b", "a.{", "a.}", "a.{}", "a.{x.y}", "a.\x01"} {
		if _, err := parseSubject(bad); err == nil {
			t.Errorf("parseSubject(%q) accepted", bad)
		}
	}
}

func mustSubject(t testing.TB, s string) subjectTemplate {
	tmpl, err := parseSubject(s)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestNATSWriteBlocksWhileDownAndHonoursContext(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "TTL", "archiver.>")
	s, _, err := open(ctx, "nats://"+ns.URL+"?max-pending-bytes=4KiB", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Stop()
	a := testkit.NewAcks()
	// With the server gone, the budget fills and Write blocks until its
	// context ends: an error, never a silent drop.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var werr error
	taken := 0
	for i := 0; i < 100 && werr == nil; i++ {
		werr = s.Write(wctx, sinkapi.Batch{Events: testkit.Events("t", "s", i*5, 5)}, a.Ack(fmt.Sprint(i)))
		if werr == nil {
			taken++
		}
	}
	if !errors.Is(werr, context.DeadlineExceeded) {
		t.Fatalf("Write while down: %v, want context.DeadlineExceeded", werr)
	}
	cctx, ccancel := context.WithTimeout(ctx, time.Second)
	defer ccancel()
	s.Close(cctx)
	// Every batch Write took was acknowledged exactly once (with an error,
	// as Close gave up waiting).
	if got := len(a.All()); got != taken {
		t.Fatalf("%d batches taken, %d acknowledged", taken, got)
	}
	for id, n := range a.All() {
		if n != 1 {
			t.Fatalf("batch %s acknowledged %d times", id, n)
		}
	}
}

// TestNATSCredsFile runs the server in operator (JWT) mode and connects
// with a .creds file (user JWT + nkey seed).
func TestNATSCredsFile(t *testing.T) {
	ctx := testkit.Ctx(t)
	operatorMode, creds := newUserCreds(t)
	credsFile := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := testkit.StartNATS(t, operatorMode)
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=creds.{table}&create-stream=CREDS&creds="+credsFile, sinkapi.Options{})
	if err != nil {
		t.Fatalf("Open with creds: %v", err)
	}
	defer s.Close(ctx)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 3)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := open(ctx, "nats://"+ns.URL+"?subject=creds.{table}", sinkapi.Options{}); err == nil {
		t.Fatal("Open without credentials succeeded against an operator-mode server")
	}
}

// TestNATSCloseUnblocksWriters: with NATS gone and a Write blocked on the
// memory bound, Close with a deadline returns, the blocked Write fails, and
// every batch taken is acknowledged (with an error) exactly once.
func TestNATSCloseUnblocksWriters(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "TTL", "archiver.>")
	s, _, err := open(ctx, "nats://"+ns.URL+"?max-pending-bytes=4KiB", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Stop()
	a := testkit.NewAcks()
	var taken atomic.Int32
	werr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			// No deadline: only Close can unblock this.
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", i*5, 5)}, a.Ack(fmt.Sprint(i))); err != nil {
				werr <- err
				return
			}
			taken.Add(1)
		}
	}()
	eventually.True(t, 30*time.Second, "a Write to block", func() bool { return taken.Load() > 0 })
	time.Sleep(200 * time.Millisecond) // let the writer reach the memory bound
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want the deadline error", err)
	}
	select {
	case err := <-werr:
		if !errors.Is(err, sinkapi.ErrClosed) {
			t.Fatalf("blocked Write returned %v, want sinkapi.ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Write still blocked 30s after Close returned")
	}
	if got := len(a.All()); got != int(taken.Load()) {
		t.Fatalf("%d batches taken, %d acknowledged", taken.Load(), got)
	}
	for id, n := range a.All() {
		if _, err := a.Get(id); n != 1 || err == nil {
			t.Fatalf("batch %s: %d acks, err %v", id, n, err)
		}
	}
}

// TestNATSDeletedByHeader: Archiver-Deleted-By is on REMOVE messages only,
// with the event's DeletedBy.
func TestNATSDeletedByHeader(t *testing.T) {
	tmpl, err := parseSubject("archiver.{table}.{kind}")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{tmpl: tmpl}
	insert := testkit.Events("sessions", "shard-1", 1, 1)[0]
	insert.Kind, insert.EventName = event.Inserted, "INSERT"
	insert.NewImage, insert.OldImage = insert.OldImage, nil
	cases := []struct {
		name, by string
		e        event.Event
	}{
		{"native expiry", event.DeletedByTTL, testkit.Events("sessions", "shard-1", 1, 1)[0]},
		{"swept expiry", event.DeletedByOther, testkit.Events("sessions", "shard-1", 2, 1)[0]},
		{"insert", "", insert},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.e.DeletedBy = c.by
			m := s.message(&c.e)
			vals, ok := m.Header[HeaderDeletedBy]
			if c.by == "" {
				if ok {
					t.Fatalf("%s set on a non-REMOVE: %q", HeaderDeletedBy, vals)
				}
			} else if len(vals) != 1 || vals[0] != c.by {
				t.Fatalf("%s = %q, want %q", HeaderDeletedBy, vals, c.by)
			}
			if len(m.Header) != len(headerNames)-1+len(vals) || m.Header.Get(HeaderKind) != string(c.e.Kind) {
				t.Fatalf("headers %v", m.Header)
			}
		})
	}
}

// TestNATSRegionHeader: in every format a message carries its event's
// Region as Archiver-Region, and format=cloudevents as ce-dynamodbregion
// too; an event without a Region (its stream ARN names none) has
// neither.
func TestNATSRegionHeader(t *testing.T) {
	tmpl, err := parseSubject("archiver.{table}.{kind}")
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range natsmsg.Formats {
		for _, region := range []string{"eu-central-1", "ap-southeast-2", ""} {
			t.Run(format+"/"+region, func(t *testing.T) {
				s := &Sink{c: Config{Format: format}, tmpl: tmpl}
				e := testkit.Events("sessions", "shard-1", 1, 1)[0]
				e.Region = region
				m := s.message(&e)
				if vals, ok := m.Header[HeaderRegion]; (region == "") == ok || (ok && (len(vals) != 1 || vals[0] != region)) {
					t.Fatalf("%s = %q (set %v), want %q", HeaderRegion, vals, ok, region)
				}
				vals, ok := m.Header[natsmsg.CERegion]
				if want := format == natsmsg.FormatCloudEvents && region != ""; ok != want || (ok && (len(vals) != 1 || vals[0] != region)) {
					t.Fatalf("%s = %q (set %v), want it set %v to %q", natsmsg.CERegion, vals, ok, want, region)
				}
			})
		}
	}
}

// TestHeaderNamesCanonical: message sets its headers without Header.Set,
// which is right only while every name is already in canonical form
// (what nats.Header.Get looks up).
func TestHeaderNamesCanonical(t *testing.T) {
	for _, k := range headerNames {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("header %q is not canonical (%q)", k, c)
		}
	}
}
