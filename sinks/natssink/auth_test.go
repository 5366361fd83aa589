package natssink

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// newUserCreds makes an operator, a system account and an account with
// JetStream, and a user of that account. It returns the server settings of
// operator (JWT) mode trusting them and the user's .creds content (user
// JWT + nkey seed).
func newUserCreds(t testing.TB) (operatorMode func(*server.Options), creds []byte) {
	t.Helper()
	opKP, _ := nkeys.CreateOperator()
	opPub, _ := opKP.PublicKey()
	opClaims := jwt.NewOperatorClaims(opPub)
	opClaims.Name = "test-operator"
	if _, err := opClaims.Encode(opKP); err != nil {
		t.Fatal(err)
	}
	sysKP, _ := nkeys.CreateAccount()
	sysPub, _ := sysKP.PublicKey()
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(opKP)
	if err != nil {
		t.Fatal(err)
	}
	accKP, _ := nkeys.CreateAccount()
	accPub, _ := accKP.PublicKey()
	acc := jwt.NewAccountClaims(accPub)
	acc.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := acc.Encode(opKP)
	if err != nil {
		t.Fatal(err)
	}
	userKP, _ := nkeys.CreateUser()
	userPub, _ := userKP.PublicKey()
	userSeed, _ := userKP.Seed()
	uc := jwt.NewUserClaims(userPub)
	uc.IssuerAccount = accPub
	userJWT, err := uc.Encode(accKP)
	if err != nil {
		t.Fatal(err)
	}
	if creds, err = jwt.FormatUserConfig(userJWT, userSeed); err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	resolver.Store(sysPub, sysJWT)
	resolver.Store(accPub, accJWT)
	return func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	}, creds
}

// TestNATSAuthFromEnv: creds-env=, nkey-env= and token-env= name an
// environment variable holding the secret itself (what an ECS secrets
// block sets; no file is read or written), over a real nats-server in
// operator, nkey and token mode. The right secret publishes and is
// acknowledged; a wrong one fails to connect; neither the secret nor a
// piece of it appears in any error.
func TestNATSAuthFromEnv(t *testing.T) {
	operatorMode, creds := newUserCreds(t)
	_, otherCreds := newUserCreds(t) // trusted by no server
	seed, pub := newNKey(t)
	otherSeed, _ := newNKey(t)
	tests := []struct {
		name       string
		tweak      func(*server.Options)
		param      string
		good, bad  string
		secretBits []string // must never appear in an error
	}{
		{"creds", operatorMode, "creds-env", string(creds), string(otherCreds), []string{string(creds[100:140]), string(otherCreds[100:140]), string(seed[:20])}},
		{"nkey", func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} }, "nkey-env", string(seed) + "\n", string(otherSeed), []string{string(seed[:20]), string(otherSeed[:20])}},
		{"token", func(o *server.Options) { o.Authorization = "s3cret-t0ken" }, "token-env", "s3cret-t0ken\n", "wr0ng-t0ken", []string{"s3cret-t0ken", "wr0ng-t0ken"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			ns := testkit.StartNATS(t, tc.tweak)
			u := "nats://" + ns.URL + "?subject=auth.{table}&create-stream=AUTH&" + tc.param + "=ARCHIVER_TEST_NATS_SECRET"
			t.Setenv("ARCHIVER_TEST_NATS_SECRET", tc.good)
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
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			t.Setenv("ARCHIVER_TEST_NATS_SECRET", tc.bad)
			bad, _, err := open(ctx, u, sinkapi.Options{})
			if err == nil {
				bad.Close(ctx)
				t.Fatal("Open with the wrong secret succeeded")
			}
			for _, bit := range tc.secretBits {
				if strings.Contains(err.Error(), bit) {
					t.Fatalf("error leaks the secret: %v", err)
				}
			}
		})
	}
}

// TestNATSAuthEnvRefused: a variable that is unset, empty or holds no
// such secret fails Open with a *sinkurl.ConfigError naming the parameter and
// the variable, before any connection and without echoing the value; a
// name that is no variable name, or several credentials, fail parsing.
func TestNATSAuthEnvRefused(t *testing.T) {
	seed, _ := newNKey(t)
	t.Setenv("ARCHIVER_TEST_EMPTY", " \n")
	t.Setenv("ARCHIVER_TEST_SEED", string(seed))
	t.Setenv("ARCHIVER_TEST_JUNK", "not-a-secret-at-all")
	// Port 1 on loopback: nothing connects there, so any error is the
	// variable's, found before a connection is tried.
	const base = "nats://127.0.0.1:1?jetstream=false&"
	tests := []struct {
		query, param, want string
	}{
		{"creds-env=ARCHIVER_TEST_UNSET", "creds-env", "environment variable ARCHIVER_TEST_UNSET is not set or empty"},
		{"token-env=ARCHIVER_TEST_EMPTY", "token-env", "environment variable ARCHIVER_TEST_EMPTY is not set or empty"},
		{"nkey-env=ARCHIVER_TEST_JUNK", "nkey-env", "environment variable ARCHIVER_TEST_JUNK holds no user nkey seed"},
		{"creds-env=ARCHIVER_TEST_SEED", "creds-env", "environment variable ARCHIVER_TEST_SEED: holds no user JWT"},
		{"creds-env=1NATS", "creds-env", `"1NATS" is not an environment variable name`},
		{"token-env=NATS-TOKEN", "token-env", `is not an environment variable name`},
		{"token-env=NATS_TOKEN&nkey-env=NATS_SEED", "creds", "give one of creds, creds-env, nkey, nkey-env, token, token-env or user/password"},
		{"creds-env=NATS_CREDS&token=x", "creds", "not several"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			s, _, err := open(testkit.Ctx(t), base+tc.query, sinkapi.Options{})
			if err == nil {
				s.Close(testkit.Ctx(t))
				t.Fatal("Open succeeded")
			}
			var ce *sinkurl.ConfigError
			if !errors.As(err, &ce) || ce.Param != tc.param || !strings.Contains(ce.Problem, tc.want) {
				t.Fatalf("got %v (%#v), want a sinkurl.ConfigError on %s saying %q", err, ce, tc.param, tc.want)
			}
			for _, secret := range []string{string(seed[:20]), "not-a-secret"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error echoes the variable's value: %v", err)
				}
			}
		})
	}
}
