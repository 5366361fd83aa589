package redact

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	cases := []struct {
		name, in string
		leaks    []string // must not appear in the output
		keeps    []string // must appear in the output
	}{
		{"password and token param", "nats://alice:pw1234@h1:4222?token=abc123&subject=x", []string{"pw1234", "abc123"}, []string{"alice:REDACTED@h1:4222", "token=REDACTED", "subject=x"}},
		{"nats token", "nats://s3cr3ttoken@h:4222", []string{"s3cr3ttoken"}, []string{"nats://REDACTED@h:4222"}},
		{"repeated secret param", "s3://b/p?password=a1b2c3&password=d4e5f6", []string{"a1b2c3", "d4e5f6"}, []string{"s3://b/p?"}},
		{"nested endpoint, encoded", "dynamodb://leases?endpoint=http%3A%2F%2FAKID%3Ahunter22%40localhost%3A8000", []string{"hunter22"}, []string{"dynamodb://leases?endpoint=", "localhost"}},
		{"nested endpoint, raw", "dynamodb://leases?endpoint=http://AKID:hunter22@localhost:8000", []string{"hunter22"}, []string{"dynamodb://leases?endpoint=", "localhost"}},
		{"nested endpoint, password with slash", "dynamodb://leases?endpoint=http://KEY:SEC/RET99@localhost:8000", []string{"SEC", "RET99"}, []string{"dynamodb://leases?endpoint=", "localhost"}},
		{"nested twice", "x://h?a=" + url.QueryEscape("y://h2?b=http://k:deep5ecret@h3"), []string{"deep5ecret"}, []string{"x://h?a="}},
		{"nkey seed param", "nats://h?nkey-seed=SUAXYZ123", []string{"SUAXYZ123"}, []string{"nats://h?"}},
		{"bad escape in user", "nats://%zz@h?token=t0k3nvalue", []string{"t0k3nvalue"}, []string{"@h"}},
		{"unparseable host", "https://user:pa55word@[::1", []string{"pa55word"}, []string{"https://"}},
		{"password with slash", "nats://user:pa/ss99@host:4222", []string{"pa/ss99", "ss99", `"pa`}, []string{"nats://REDACTED@host:4222"}},
		{"password with hash", "nats://user:pa#ss99@host:4222", []string{"ss99", ":pa"}, []string{"nats://REDACTED@host:4222"}},
		{"password with question mark", "nats://user:pa?ss99@host:4222", []string{"ss99", ":pa"}, []string{"nats://REDACTED@host:4222"}},
		{"password with space", "nats://user:pa ss99@host:4222", []string{"ss99", ":pa"}, []string{"nats://REDACTED@host:4222"}},
		{"password misread as port and path", "nats://user:1234/ss99@host:4222", []string{"1234", "ss99"}, []string{"nats://REDACTED@host:4222"}},
		{"token with slash misread as host", "nats://tok/en99@host:4222", []string{"tok", "en99"}, []string{"nats://REDACTED@host:4222"}},
		{"password with question mark misread as query", "nats://u:12?en99@host", []string{"12", "en99"}, []string{"nats://REDACTED@host"}},
		{"unparseable, encoded nested", "nats://u:p/w@h?endpoint=http%3A%2F%2FK%3AS3cr3t%40h2", []string{"S3cr3t", "p/w"}, []string{"nats://REDACTED@h?endpoint="}},
		{"opaque", "nats:u:opaque5ecret@h", []string{"opaque5ecret"}, []string{"@h"}},
		{"scheme-less", "//u:12/sch3meless@h", []string{"sch3meless"}, []string{"@h"}},
		{"@ in a query value is over-masked", "nats://h:4222?user=alice@example.com", nil, []string{"nats://REDACTED@example.com"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := URL(c.in)
			for _, l := range c.leaks {
				if strings.Contains(out, l) {
					t.Errorf("URL(%q) = %q leaks %q", c.in, out, l)
				}
			}
			for _, k := range c.keeps {
				if !strings.Contains(out, k) {
					t.Errorf("URL(%q) = %q lacks %q", c.in, out, k)
				}
			}
		})
	}
}

// TestURLKeepsWhatHoldsNoSecret: URLs without secrets come back as written.
func TestURLKeepsWhatHoldsNoSecret(t *testing.T) {
	for _, in := range []string{
		"s3://bucket/prefix?region=eu-west-1&endpoint=http%3A%2F%2Flocalhost%3A9000",
		"s3://bucket/prefix?endpoint=http://localhost:9000&path-style=true",
		"stdout://",
		"file:///var/lib/archiver@prod/checkpoints.json",
		"file://./data",
		"nats://h1:4222,h2:4222?subject=a.{table}&events=expired,deleted",
		"dynamodb://leases?region=eu-west-1&create=true",
		"http://127.0.0.1:8000",
		"",
	} {
		if out := URL(in); out != in {
			t.Errorf("URL(%q) = %q; want it unchanged (no secrets)", in, out)
		}
	}
}

func TestText(t *testing.T) {
	cases := []struct{ in, leak string }{
		{`sink "nats://u:pw9999@h?token=zzz999": preflight`, "pw9999"},
		{`sink "nats://u:pw9999@h?token=zzz999": preflight`, "zzz999"},
		{`dial http://AK:SK7777@host failed`, "SK7777"},
		{`parse "nats://user:pa ss7777@host": invalid`, "ss7777"},
		{`parse "nats://user:pa/ss7777@host": invalid`, "ss7777"},
		{`endpoint=http%3A%2F%2FAK%3ASK7777%40host`, "SK7777"},
	}
	for _, c := range cases {
		if out := Text(c.in); strings.Contains(out, c.leak) {
			t.Errorf("Text(%q) = %q leaks %q", c.in, out, c.leak)
		}
	}
}

func TestParseError(t *testing.T) {
	for _, raw := range []string{"nats://user:pa/ss@host", "http://KEY:SEC%zzRET@h", "nats://u:pa ss@h"} {
		_, err := url.Parse(raw)
		if err == nil {
			t.Fatalf("url.Parse(%q) succeeded", raw)
		}
		msg := ParseError(err)
		if strings.Contains(msg, "pa") || strings.Contains(msg, "SEC") || strings.Contains(msg, "ss") || msg == "" {
			t.Errorf("ParseError(%q) = %q echoes the input", raw, msg)
		}
	}
	if got := ParseError(errors.New("plain")); got != "plain" {
		t.Errorf("ParseError(plain) = %q", got)
	}
}

// FuzzURL checks that a password, token or secret parameter of a parseable
// URL never survives masking.
func FuzzURL(f *testing.F) {
	f.Add("nats://u:p4ssw0rd@h:1?token=x")
	f.Add("nats://%zz@h")
	f.Add("s3://b/p?password=a&password=b")
	f.Add("nats://h:4222?token=s3cr3tvalue&subject=a.b")
	f.Add("dynamodb://t?endpoint=http://k:s3cr3tkey@h")
	f.Fuzz(func(t *testing.T, s string) {
		out := URL(s)
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		var secrets []string
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				secrets = append(secrets, p)
			} else {
				secrets = append(secrets, u.User.Username())
			}
		}
		for k, vs := range u.Query() {
			if SecretParam(k) {
				secrets = append(secrets, vs...)
			}
		}
		for _, sec := range secrets {
			// Only secrets that are distinctive and not also elsewhere in
			// the URL (or in the mask itself) can be checked.
			if len(sec) < 6 || strings.Count(s, sec) != 1 || strings.Contains(Mask, sec) || sec != url.QueryEscape(sec) {
				continue
			}
			if strings.Contains(out, sec) {
				t.Fatalf("URL(%q) = %q leaks %q", s, out, sec)
			}
		}
	})
}

// FuzzURLPlantedPassword plants a secret in the password position of
// SCHEME://USER:SECRET@REST, its middle chosen by the fuzzer ('/', '#',
// '?', spaces, '@', anything but "://"), and checks that neither end of
// it survives, whatever url.Parse makes of the string. A USER starting
// with '/' is no user: file:///PATH has no user information.
func FuzzURLPlantedPassword(f *testing.F) {
	f.Add("nats", "alice", "/", "host:4222?subject=x")
	f.Add("nats", "", "#x?y z", "h")
	f.Add("dynamodb", "t?endpoint=http://KEY", "", "localhost:8000")
	f.Add("s3", "12", "?", "b/p@q")
	f.Add("http", "a@b", "%zz", "[::1")
	f.Fuzz(func(t *testing.T, scheme, user, middle, rest string) {
		const head, tail = "Pl4ntedHead", "Pl4ntedTail"
		all := strings.ToLower(scheme + user + middle + rest)
		if strings.HasPrefix(user, "/") || strings.Contains(middle, "://") || strings.Contains(all, "4nted") {
			return
		}
		raw := scheme + "://" + user + ":" + head + middle + tail + "@" + rest
		out := URL(raw)
		if strings.Contains(out, head) || strings.Contains(out, tail) {
			t.Fatalf("URL(%q) = %q leaks the password", raw, out)
		}
		if msg := Text(strconv.Quote(raw)); strings.Contains(msg, head) || strings.Contains(msg, tail) {
			t.Fatalf("Text of quoted %q = %q leaks the password", raw, msg)
		}
	})
}
