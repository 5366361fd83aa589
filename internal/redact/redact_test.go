package redact

import (
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	cases := []struct{ in, leak string }{
		{"nats://alice:pw1234@h1:4222?token=abc123&subject=x", "pw1234"},
		{"nats://alice:pw1234@h1:4222?token=abc123&subject=x", "abc123"},
		{"nats://s3cr3ttoken@h:4222", "s3cr3ttoken"},
		{"s3://b/p?password=a1b2c3&password=d4e5f6", "a1b2c3"},
		{"s3://b/p?password=a1b2c3&password=d4e5f6", "d4e5f6"},
		{"dynamodb://leases?endpoint=http%3A%2F%2FAKID%3Ahunter22%40localhost%3A8000", "hunter22"},
		{"dynamodb://leases?endpoint=http://AKID:hunter22@localhost:8000", "hunter22"},
		{"nats://h?nkey-seed=SUAXYZ123", "SUAXYZ123"},
		{"nats://%zz@h?token=t0k3nvalue", "t0k3nvalue"},
		{"https://user:pa55word@[::1", "pa55word"},
	}
	for _, c := range cases {
		if out := URL(c.in); strings.Contains(out, c.leak) {
			t.Errorf("URL(%q) = %q leaks %q", c.in, out, c.leak)
		}
	}
	keep := "s3://bucket/prefix?region=eu-west-1&endpoint=http%3A%2F%2Flocalhost%3A9000"
	if out := URL(keep); out != keep {
		t.Errorf("URL(%q) = %q; want it unchanged (no secrets)", keep, out)
	}
}

func TestText(t *testing.T) {
	msg := `sink "nats://u:pw9999@h?token=zzz999": preflight: dial http://AK:SK7777@host failed`
	out := Text(msg)
	for _, leak := range []string{"pw9999", "zzz999", "SK7777"} {
		if strings.Contains(out, leak) {
			t.Errorf("Text leaks %q: %s", leak, out)
		}
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
