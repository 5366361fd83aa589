package natssink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// TestNATSPermissionsDoc holds docs/SINKS.md's "NATS permissions" to the
// code: its sample nats-server configuration, loaded into a real
// nats-server, lets the sink do everything it does (create-stream making
// the stream and changing its limits, publishing, the preflight, and
// replay's read of the stream's message IDs, by STREAM.MSG.GET and, on a
// stream with allow_direct, DIRECT.GET) without one permissions
// violation; and each allowed subject, removed alone, makes that fail
// with a violation naming a subject the removed line allowed. So the list
// is what the code calls, no less and no more.
func TestNATSPermissionsDoc(t *testing.T) {
	conf := natsPermissionsConf(t)
	pub, sub := archiverAllows(t, loadPermissionsConf(t, conf))
	if len(pub) < 5 || len(sub) == 0 {
		t.Fatalf("the sample allows only publish %v, subscribe %v", pub, sub)
	}
	t.Run("as documented", func(t *testing.T) {
		if err, seen := runPermissionScenario(t, conf, nil); err != nil || len(seen) > 0 {
			t.Fatalf("with the documented permissions: %v; violations: %q", err, seen)
		}
	})
	for _, drop := range append(slices.Clone(pub), sub...) {
		t.Run("without "+drop, func(t *testing.T) {
			err, seen := runPermissionScenario(t, conf, &drop)
			t.Logf("%v; violations %q", err, seen)
			if err == nil {
				t.Fatalf("the sink did everything without %q: the documented list grants more than the code calls", drop)
			}
			if len(seen) == 0 {
				t.Fatalf("failed without naming a permissions violation: %v", err)
			}
			named := false
			for _, v := range seen {
				m := violationSubject.FindStringSubmatch(v)
				named = named || m != nil && server.SubjectMatchesFilter(m[1], drop)
			}
			if !named {
				t.Errorf("the violations %q name no subject %q allowed", seen, drop)
			}
		})
	}
}

// violationSubject is the subject of nats-server's permissions violation.
var violationSubject = regexp.MustCompile(`Permissions Violation for (?:Publish|Subscription) to "([^"]+)"`)

// natsPermissionsConf is the conf block of docs/SINKS.md's "NATS
// permissions".
func natsPermissionsConf(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "SINKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## NATS permissions\n")
	if !ok {
		t.Fatal(`docs/SINKS.md has no "## NATS permissions" section`)
	}
	_, block, ok := strings.Cut(section, "```conf\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal(`docs/SINKS.md's "NATS permissions" has no conf block`)
	}
	return block
}

// permissionsPassword is the archiver user's password in the test:
// $ARCHIVER_NATS_PASSWORD of the documented configuration.
const permissionsPassword = "test-archiver-password"

// loadPermissionsConf parses conf as nats-server does.
func loadPermissionsConf(t *testing.T, conf string) *server.Options {
	t.Helper()
	t.Setenv("ARCHIVER_NATS_PASSWORD", permissionsPassword)
	path := filepath.Join(t.TempDir(), "nats-server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("docs/SINKS.md's configuration: %v", err)
	}
	return o
}

// archiverUser is the documented configuration's user archiver.
func archiverUser(t *testing.T, o *server.Options) *server.User {
	t.Helper()
	for _, u := range o.Users {
		if u.Username == "archiver" {
			if u.Password != permissionsPassword || u.Account == nil || u.Permissions == nil || u.Permissions.Publish == nil || u.Permissions.Subscribe == nil {
				t.Fatalf("user archiver: want a password from $ARCHIVER_NATS_PASSWORD, an account, publish and subscribe permissions; got %+v", u)
			}
			if len(u.Permissions.Publish.Deny) > 0 || len(u.Permissions.Subscribe.Deny) > 0 || u.Permissions.Response != nil {
				t.Fatalf("user archiver: the test removes allowed subjects only, and the sample denies some or sets allow_responses: %+v", u.Permissions)
			}
			return u
		}
	}
	t.Fatal("docs/SINKS.md's configuration has no user archiver")
	return nil
}

func archiverAllows(t *testing.T, o *server.Options) (pub, sub []string) {
	u := archiverUser(t, o)
	return u.Permissions.Publish.Allow, u.Permissions.Subscribe.Allow
}

// runPermissionScenario starts a nats-server with conf, the archiver's
// allowed subject drop removed (nil: none), and an admin user of the same
// account, and does what the sink does with those permissions. It
// returns the first failure and the permissions violations the sink
// logged; the first violation ends the scenario (a denied request is
// dropped by nats-server, and would otherwise wait for its timeout).
func runPermissionScenario(t *testing.T, conf string, drop *string) (error, []string) {
	t.Helper()
	o := loadPermissionsConf(t, conf)
	u := archiverUser(t, o)
	if drop != nil {
		p := u.Permissions
		n := len(p.Publish.Allow) + len(p.Subscribe.Allow)
		p.Publish.Allow = slices.DeleteFunc(p.Publish.Allow, func(s string) bool { return s == *drop })
		p.Subscribe.Allow = slices.DeleteFunc(p.Subscribe.Allow, func(s string) bool { return s == *drop })
		if len(p.Publish.Allow)+len(p.Subscribe.Allow) != n-1 {
			t.Fatalf("%q is not allowed once", *drop)
		}
		if len(p.Subscribe.Allow) == 0 {
			// nats-server takes an empty subscribe allow list as no
			// restriction (an empty publish list allows nothing).
			p.Subscribe = &server.SubjectPermission{Deny: []string{">"}}
		}
	}
	ns := testkit.StartNATS(t, func(so *server.Options) {
		so.Accounts = o.Accounts
		so.Users = append(o.Users, &server.User{Username: "admin", Password: "admin", Account: u.Account})
	})
	_, admin := ns.Client(t, nats.UserInfo("admin", "admin"))

	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	defer cancel()
	log := &violationLog{LevelEnabler: zapcore.DebugLevel, cancel: cancel}
	var opened []sinkapi.Sink
	err := permissionScenario(ctx, t, "nats://archiver:"+permissionsPassword+"@"+ns.URL, admin, zap.New(log), &opened)
	// Closed with the scenario's context: after a failure it has ended,
	// and Close gives up on what JetStream never acknowledged.
	for _, s := range opened {
		s.Close(ctx)
	}
	return err, log.violations()
}

// permissionScenario is what the sink does: create-stream makes the
// stream and finds it, a batch is published and acknowledged, the
// preflight runs; a sink whose URL changes a limit updates the stream;
// replay's read of the stream's message IDs, on the stream as made
// (STREAM.MSG.GET) and with allow_direct (DIRECT.GET).
func permissionScenario(ctx context.Context, t *testing.T, url string, admin jetstream.JetStream, log *zap.Logger, opened *[]sinkapi.Sink) error {
	open := func(query string) (*Sink, error) {
		sk, _, err := open(ctx, url+"?create-stream=ARCHIVER"+query, sinkapi.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		*opened = append(*opened, sk)
		return sk.(*Sink), nil
	}
	publish := func(s *Sink, first int) error {
		acked := make(chan error, 1)
		if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("orders", "s", first, 3)}, func(err error) { acked <- err }); err != nil {
			return err
		}
		select {
		case err := <-acked:
			return err
		case <-ctx.Done():
			return fmt.Errorf("waiting for the acknowledgement: %w", ctx.Err())
		}
	}
	readIDs := func(s *Sink, want int) error {
		ids, err := s.StreamIDs(ctx, 100)
		if err != nil {
			return err
		}
		if ids.Read != want || !ids.Complete {
			return fmt.Errorf("StreamIDs read %d message IDs (complete %v), want %d", ids.Read, ids.Complete, want)
		}
		return nil
	}

	s, err := open("") // the stream is missing: made
	if err != nil {
		return fmt.Errorf("open (create): %w", err)
	}
	if err := publish(s, 1); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := s.Preflight(ctx); err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	s, err = open("&stream-max-age=48h") // the stream exists with 168h: updated
	if err != nil {
		return fmt.Errorf("open (update): %w", err)
	}
	if err := publish(s, 4); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := readIDs(s, 6); err != nil {
		return fmt.Errorf("replay's read: %w", err)
	}
	st, err := admin.Stream(ctx, "ARCHIVER")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.MaxAge.Hours() != 48 {
		t.Fatalf("the stream's max age is %s: the sink did not update it", cfg.MaxAge)
	}
	cfg.AllowDirect = true
	if _, err := admin.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := readIDs(s, 6); err != nil {
		return fmt.Errorf("replay's read with allow_direct: %w", err)
	}
	return nil
}

// violationLog is a zap core that keeps the permissions violations the
// sink logs (nats.go's asynchronous errors) and calls cancel at the first.
type violationLog struct {
	zapcore.LevelEnabler
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   []string
}

func (l *violationLog) With([]zapcore.Field) zapcore.Core { return l }

func (l *violationLog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, l)
}

func (l *violationLog) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && errors.Is(err, nats.ErrPermissionViolation) {
			l.mu.Lock()
			l.seen = append(l.seen, err.Error())
			l.mu.Unlock()
			l.cancel()
		}
	}
	return nil
}

func (l *violationLog) Sync() error { return nil }

func (l *violationLog) violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}
