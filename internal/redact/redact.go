// Package redact masks secrets in URLs and in messages that may echo them,
// before they reach logs, errors or printed configuration. It is the one
// place that decides what counts as a secret in a URL.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "REDACTED"

// secretWords mark a query parameter as secret when its name contains one.
var secretWords = []string{"token", "password", "passwd", "secret", "cred", "nkey", "seed", "jwt", "signature", "session", "tls-key", "access-key", "accesskey"}

// SecretParam reports whether a URL query parameter's value is a secret.
func SecretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// pattern catches name=value pairs of secret-looking names and the user
// information of URLs anywhere in free text: the last line of defence for
// messages and for strings that do not parse as URLs.
var (
	pattern  = regexp.MustCompile(`(?i)([a-z0-9_.-]*(?:` + strings.Join(secretWords, "|") + `)[a-z0-9_.-]*)=[^&#"'\s]*`)
	userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s"']*@`)
)

// Text masks secret-looking name=value pairs and URL user information in
// free text, such as an error message that quotes a URL.
func Text(s string) string {
	s = userinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	return pattern.ReplaceAllString(s, "${1}="+Mask)
}

// URL returns raw with its secrets masked: the user information (a password,
// or a user name alone, which for NATS is a token), the values of secret
// query parameters, and the same again inside parameter values that are
// URLs themselves (endpoint=http://KEY:SECRET@host). A string that does not
// parse as a URL is masked as text.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Text(raw)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else if u.User.Username() != "" {
			u.User = url.User(Mask)
		}
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, kv := range parts {
			k, v, _ := strings.Cut(kv, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				parts[i] = Text(kv)
				continue
			}
			if SecretParam(name) {
				parts[i] = k + "=" + Mask
				continue
			}
			if val, err := url.QueryUnescape(v); err == nil && strings.Contains(val, "://") {
				if m := URL(val); m != val {
					parts[i] = k + "=" + url.QueryEscape(m)
				}
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.String()
}
