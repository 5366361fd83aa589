package natssink

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ttl-archiver/archiver/sinkurl"
)

// envVarName is what creds-env=, nkey-env= and token-env= accept: a
// POSIX environment variable name.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseNATSAuthEnv reads creds-env=, nkey-env= and token-env=: each names
// an environment variable that holds the secret itself (a .creds file's
// content, an nkey seed, a token), as an ECS task's secrets block sets
// it, so that a container with a read-only root file system needs no
// file and the URL carries no secret.
func parseNATSAuthEnv(p *sinkurl.Params, c *Config) error {
	for _, f := range []struct {
		name string
		dst  *string
	}{{"creds-env", &c.CredsEnv}, {"nkey-env", &c.NKeyEnv}, {"token-env", &c.TokenEnv}} {
		v, err := p.Str(f.name, "")
		if err != nil {
			return err
		}
		if v != "" && !envVarName.MatchString(v) {
			return p.Fail(f.name, fmt.Sprintf("%q is not an environment variable name (letters, digits and _, not starting with a digit)", v))
		}
		*f.dst = v
	}
	return nil
}

// natsAuth returns the option that authenticates the sink's connection, or
// nil when c names no credentials. The *-env secrets are read from the
// environment here, once, and are never logged or echoed: an error names
// the parameter and the variable, not the value.
func natsAuth(c Config, url string) (nats.Option, error) {
	fail := func(param, problem string) error {
		return &sinkurl.ConfigError{URL: url, Param: param, Problem: problem}
	}
	secret := func(param, name string) (string, error) {
		v, ok := os.LookupEnv(name)
		if v = strings.TrimRight(v, "\r\n"); !ok || strings.TrimSpace(v) == "" {
			return "", fail(param, fmt.Sprintf("environment variable %s is not set or empty", name))
		}
		return v, nil
	}
	switch {
	case c.Creds != "":
		return nats.UserCredentials(c.Creds), nil
	case c.CredsEnv != "":
		v, err := secret("creds-env", c.CredsEnv)
		if err != nil {
			return nil, err
		}
		return credsOption([]byte(v), func(problem string) error {
			return fail("creds-env", fmt.Sprintf("environment variable %s: %s", c.CredsEnv, problem))
		})
	case c.NKey != "":
		nk, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("nats sink: nkey: %w", err)
		}
		return nk, nil
	case c.NKeyEnv != "":
		v, err := secret("nkey-env", c.NKeyEnv)
		if err != nil {
			return nil, err
		}
		kp, err := nkeys.ParseDecoratedUserNKey([]byte(v))
		if err != nil {
			return nil, fail("nkey-env", fmt.Sprintf("environment variable %s holds no user nkey seed (SU...): %v", c.NKeyEnv, err))
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fail("nkey-env", fmt.Sprintf("environment variable %s: %v", c.NKeyEnv, err))
		}
		return nats.Nkey(pub, kp.Sign), nil
	case c.Token != "":
		return nats.Token(c.Token), nil
	case c.TokenEnv != "":
		v, err := secret("token-env", c.TokenEnv)
		if err != nil {
			return nil, err
		}
		return nats.Token(v), nil
	case c.User != "":
		return nats.UserInfo(c.User, c.Password), nil
	}
	return nil, nil
}

// credsOption authenticates with a .creds file's content (the user JWT and
// its nkey seed between nats' ----- markers), as nats.UserCredentials does
// with the file.
func credsOption(creds []byte, fail func(problem string) error) (nats.Option, error) {
	if !strings.Contains(string(creds), "USER JWT") {
		return nil, fail("holds no user JWT (want a .creds file's content: -----BEGIN NATS USER JWT----- ... and the nkey seed)")
	}
	jwt, err := nkeys.ParseDecoratedJWT(creds)
	if err != nil {
		return nil, fail(fmt.Sprintf("no user JWT: %v", err))
	}
	kp, err := nkeys.ParseDecoratedUserNKey(creds)
	if err != nil {
		return nil, fail(fmt.Sprintf("no user nkey seed (SU...): %v", err))
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fail(fmt.Sprintf("no user nkey seed: %v", err))
	}
	return nats.UserJWTAndSeed(jwt, string(seed)), nil
}
