package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/natstest"
)

// Issue 19, point 1: one message never breaks the NATS connection. The
// tables have binary keys "pk" (hash) and "sk" (range); their names are
// the pair the old subject mapping merged.
var bkTables = []string{"orders.v2", "orders_v2"}

const bkSubject = "bk.{table}.{kind}.{pk}.{sk}"

// createBinaryKeyTable creates table with binary keys pk and sk, a stream
// with both images, and TTL on "exp".
func createBinaryKeyTable(t testing.TB, db *dynamodb.Client, table string) {
	t.Helper()
	enginetest.CreateTable(t, db, enginetest.Table{Name: table, HashType: dtypes.ScalarAttributeTypeB,
		Range: "sk", RangeType: dtypes.ScalarAttributeTypeB, TTL: ttlAttr})
}

// putExpiredBinary writes an item with keys pk and sk whose TTL has passed.
func putExpiredBinary(t testing.TB, ctx context.Context, db *dynamodb.Client, table string, pk, sk []byte) {
	t.Helper()
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]dtypes.AttributeValue{
		"pk":      &dtypes.AttributeValueMemberB{Value: pk},
		"sk":      &dtypes.AttributeValueMemberB{Value: sk},
		ttlAttr:   &dtypes.AttributeValueMemberN{Value: fmt.Sprint(expiredTTL())},
		"payload": &dtypes.AttributeValueMemberS{Value: "small"},
	}})
	if err != nil {
		t.Fatalf("PutItem %s: %v", table, err)
	}
}

// smallBinaryKeys writes n small expired items in each bkTables table and
// returns their identities (bkID).
func smallBinaryKeys(t testing.TB, ctx context.Context, db *dynamodb.Client, from, n int) []string {
	var ids []string
	for i := from; i < from+n; i++ {
		for _, table := range bkTables {
			pk, sk := []byte(fmt.Sprintf("k.%04d", i)), []byte{byte(i), 0xff}
			putExpiredBinary(t, ctx, db, table, pk, sk)
			ids = append(ids, bkID(table, pk))
		}
	}
	return ids
}

// bkID names an item of the binary-key tables: its table and hash key.
func bkID(table string, pk []byte) string { return fmt.Sprintf("%s/%x", table, pk) }

func eventBKID(ev *event.Event) string {
	pk, _ := ev.Keys["pk"].(*stypes.AttributeValueMemberB)
	if pk == nil {
		return ev.Table + "/?"
	}
	return bkID(ev.Table, pk.Value)
}

// bkStream reads every message of st: deliveries per item, and the item
// each subject carried.
func bkStream(t testing.TB, ctx context.Context, st jetstream.Stream) (map[string]int, map[string]string) {
	t.Helper()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID, bySubject := map[string]int{}, map[string]string{}
	want := int(info.State.Msgs)
	if want == 0 {
		return byID, bySubject
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < want; {
		batch, err := cons.Fetch(want-n, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			ev, err := event.DecodeLine(m.Data())
			if err != nil {
				t.Fatalf("message on %.100s does not decode: %v", m.Subject(), err)
			}
			id := eventBKID(&ev)
			byID[id]++
			if other, ok := bySubject[m.Subject()]; ok && other != id {
				t.Errorf("%s and %s share the subject %.200q", other, id, m.Subject())
			}
			bySubject[m.Subject()] = id
		}
		if got == 0 {
			t.Fatalf("read %d of %d JetStream messages", n, want)
		}
		n += got
	}
	return byID, bySubject
}

// deadLetters reads the events a file dead-letter sink holds under dir.
func deadLetters(t testing.TB, dir string) []event.Event {
	t.Helper()
	var out []event.Event
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			if ev, err := event.DecodeLine(sc.Bytes()); err == nil {
				out = append(out, ev)
			}
		}
		return sc.Err()
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("reading the dead-letter sink: %v", err)
	}
	return out
}

// natsUser and natsPassword are the user the archiver connects as.
const natsUser, natsPassword = "archiver", "right"

// natsWithUser starts a nats-server with JetStream whose one user is
// natsUser with natsPassword; a test restarts it on the same port and
// store with another password (natstest.Server.Restart, withPassword).
func natsWithUser(t testing.TB) *natstest.Server {
	t.Helper()
	return natstest.Start(t, withPassword(natsPassword))
}

// withPassword sets natsUser's password to password.
func withPassword(password string) func(*server.Options) {
	return func(o *server.Options) { o.Users = []*server.User{{Username: natsUser, Password: password}} }
}

// natsUserClient connects a plain client as natsUser.
func natsUserClient(t testing.TB, ns *natstest.Server) jetstream.JetStream {
	return natsClient(t, natsUser+":"+natsPassword+"@"+ns.Addr())
}

// closedForControlLine counts the connections the server closed for a
// protocol line over its max_control_line.
func closedForControlLine(t testing.TB, srv *server.Server) int {
	t.Helper()
	cz, err := srv.Connz(&server.ConnzOptions{State: server.ConnClosed, Limit: 1024})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cz.Conns {
		if strings.Contains(strings.ToLower(c.Reason), "control line") {
			n++
		}
	}
	return n
}

// bkBed starts the engine, the two binary-key tables, a nats-server with a
// stream BK capturing bk.>, and `archiver run` on both tables with
// --dead-letter file://DIR --retry-for 5s.
type bkBed struct {
	*procBed
	nats    *natstest.Server
	st      jetstream.Stream
	dlq     string
	archive *proc
}

func newBKBed(t *testing.T) *bkBed {
	b := &bkBed{procBed: newProcBed(t)}
	for _, table := range bkTables {
		createBinaryKeyTable(t, b.db, table)
	}
	b.nats = natsWithUser(t)
	var err error
	b.st, err = natsUserClient(t, b.nats).CreateStream(b.ctx, jetstream.StreamConfig{Name: "BK", Subjects: []string{"bk.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b.dlq = filepath.Join(b.work, "dead")
	b.archive = b.run("--table", bkTables[0], "--table", bkTables[1],
		"--sink", "nats://"+natsUser+":"+natsPassword+"@"+b.nats.Addr()+"?subject="+bkSubject,
		"--dead-letter", "file://"+b.dlq, "--retry-for", "5s")
	return b
}

// waitOnStream waits until the stream holds every one of ids.
func (b *bkBed) waitOnStream(what string, ids []string) {
	b.t.Helper()
	eventually.Wait(b.t, 120*time.Second, what, func() error {
		alive(b.t, b.archive)
		info, err := b.st.Info(b.ctx)
		if err != nil {
			return err
		}
		if int(info.State.Msgs) < len(ids) {
			return fmt.Errorf("%d of %d messages", info.State.Msgs, len(ids))
		}
		byID, _ := bkStream(b.t, b.ctx, b.st)
		for _, id := range ids {
			if byID[id] == 0 {
				return fmt.Errorf("%s not on the stream", id)
			}
		}
		return nil
	})
}

// readyz is the running archiver's /readyz status code.
func (b *bkBed) readyz() (int, error) {
	addr := logField(b.archive.logPath, "archiver running", "metrics_addr")
	if addr == "" {
		return 0, fmt.Errorf("no metrics_addr logged yet")
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestNATSLongKeysNeverBreakTheConnection is issue 19's "done when": two
// tables (orders.v2 and orders_v2, which shared subjects before) with 100
// small expiries each, plus an item with a 2048-byte binary hash key and
// a 1024-byte binary range key, under bk.{table}.{kind}.{pk}.{sk} with
// --dead-letter and --retry-for 5s. Every small expiry reaches NATS, the
// long one reaches NATS or the dead-letter sink, every item has its own
// subject, and the server never closed the archiver's connection.
func TestNATSLongKeysNeverBreakTheConnection(t *testing.T) {
	t.Parallel()
	b := newBKBed(t)
	small := smallBinaryKeys(t, b.ctx, b.db, 0, 50)
	longPK, longSK := bytes.Repeat([]byte{0xab}, 2048), bytes.Repeat([]byte{0xcd}, 1024)
	putExpiredBinary(t, b.ctx, b.db, bkTables[0], longPK, longSK)
	long := bkID(bkTables[0], longPK)
	small = append(small, smallBinaryKeys(t, b.ctx, b.db, 50, 50)...)
	if len(small) != 200 {
		t.Fatalf("wrote %d small items, want 200", len(small))
	}

	b.waitOnStream("every small expiry on JetStream", small)
	eventually.Wait(t, 60*time.Second, "the long item on JetStream or dead-lettered", func() error {
		byID, _ := bkStream(t, b.ctx, b.st)
		if byID[long] > 0 {
			return nil
		}
		for _, ev := range deadLetters(t, b.dlq) {
			if eventBKID(&ev) == long {
				return nil
			}
		}
		return fmt.Errorf("%s neither on JetStream nor dead-lettered", long)
	})
	stopClean(t, b.archive)

	byID, bySubject := bkStream(t, b.ctx, b.st)
	for _, id := range small {
		if byID[id] != 1 {
			t.Errorf("%s on JetStream %d times, want once", id, byID[id])
		}
	}
	for subj := range bySubject {
		if len(subj) > 1024 {
			t.Errorf("subject of %d bytes, over the default max-subject", len(subj))
		}
	}
	for _, ev := range deadLetters(t, b.dlq) {
		if id := eventBKID(&ev); id != long {
			t.Errorf("%s dead-lettered (%+v); only the long item may be", id, ev.DeadLetter)
		}
	}
	if n := closedForControlLine(t, b.nats.Running()); n != 0 {
		t.Errorf("the server closed %d connections for a control line over its limit", n)
	}
}

// TestNATSConnectionClosedByTheServerIsRebuilt: the server ends the
// archiver's connection in a way nats.go takes as final: it comes back
// with the archiver's password no longer valid, so nats.go's reconnect
// meets the same authorization error twice and closes the connection for
// good (the archiver logs it). /readyz is unready; once the server takes
// the password again the archiver builds a new connection, /readyz
// recovers, and every expiry written around the close reaches JetStream
// once; none is dead-lettered.
func TestNATSConnectionClosedByTheServerIsRebuilt(t *testing.T) {
	t.Parallel()
	b := newBKBed(t)
	before := smallBinaryKeys(t, b.ctx, b.db, 0, 10)
	b.waitOnStream("the first items on JetStream", before)

	b.nats.Restart(withPassword("changed"))
	around := smallBinaryKeys(t, b.ctx, b.db, 10, 25)
	eventually.Wait(t, 120*time.Second, "the archiver's connection closed for good", func() error {
		alive(t, b.archive)
		if log, _ := os.ReadFile(b.archive.logPath); !bytes.Contains(log, []byte("building a new one")) {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	if code, err := b.readyz(); err != nil || code == http.StatusOK {
		t.Errorf("/readyz %d (%v) while the server refuses the archiver, want unready", code, err)
	}
	b.nats.Restart(withPassword(natsPassword))
	after := smallBinaryKeys(t, b.ctx, b.db, 35, 10)
	all := append(append(append([]string{}, before...), around...), after...)
	b.st = streamOf(t, b.ctx, natsUserClient(t, b.nats), "BK")
	b.waitOnStream("every item on JetStream after the new connection", all)
	eventually.Wait(t, 60*time.Second, "/readyz ready again", func() error {
		if code, err := b.readyz(); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d (%v)", code, err)
		}
		return nil
	})
	if log, _ := os.ReadFile(b.archive.logPath); !bytes.Contains(log, []byte("nats: new connection")) {
		t.Errorf("the archiver did not log its new connection:\n%s", b.archive.tail(30))
	}
	stopClean(t, b.archive)
	byID, _ := bkStream(t, b.ctx, b.st)
	for _, id := range all {
		if byID[id] != 1 {
			t.Errorf("%s on JetStream %d times, want once", id, byID[id])
		}
	}
	if dl := deadLetters(t, b.dlq); len(dl) != 0 {
		t.Errorf("%d events dead-lettered for a closed connection, e.g. %s: %+v", len(dl), eventBKID(&dl[0]), dl[0].DeadLetter)
	}
}

// streamOf looks a stream up (again, after the server restarted).
func streamOf(t testing.TB, ctx context.Context, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
