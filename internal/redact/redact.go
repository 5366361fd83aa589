// Package redact masks secrets in URLs and in messages that may echo them,
// before they reach logs, errors or printed configuration. It is the one
// place that decides what counts as a secret in a URL:
//
//   - the password of the user information (the user name is kept when a
//     password follows it; a user name alone, a NATS token, is masked);
//   - the values of query parameters whose names look secret
//     ([SecretParam]: token=, password=, creds=, nkey=, ...);
//   - the same again in URLs nested in parameter values
//     (dynamodb://t?endpoint=http://KEY:SECRET@host), recursively;
//   - in a string url.Parse rejects or misreads (a password holding '/',
//     '?', '#' or a space that was not percent-encoded), everything between
//     each "://" and the last '@' after it, user name included.
//
// The price of never leaking is over-masking: an '@' outside the user
// information (an s3:// prefix or a query value holding one) masks the host
// and path before it too. A file:///PATH URL has no user information and is
// never masked.
package redact

import (
	"errors"
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

// The patterns of Text: name=value pairs of secret-looking names, and the
// user information of URLs anywhere in free text (in a quoted string up to
// its last '@' before the closing quote, elsewhere up to the last '@'
// before a space or quote; percent-encoded nested URLs up to the last
// %40).
var (
	pattern      = regexp.MustCompile(`(?i)([a-z0-9_.-]*(?:` + strings.Join(secretWords, "|") + `)[a-z0-9_.-]*)=[^&#"'\s]*`)
	quotedUser   = regexp.MustCompile(`("(?:[^"\\]|\\.)*?://)(?:[^"\\]|\\.)*@`)
	userinfo     = regexp.MustCompile(`([a-zA-Z0-9+.-]*://)[^\s"']*@`)
	encodedUser  = regexp.MustCompile(`(?i)(%3A%2F%2F)[^\s"'&]*%40`)
	quotedString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// Text masks secret-looking name=value pairs and URL user information in
// free text, such as an error message that quotes a URL. It is the last
// line of defence: a URL should reach a message through [URL] already.
func Text(s string) string {
	s = quotedUser.ReplaceAllString(s, "${1}"+Mask+"@")
	s = userinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	s = encodedUser.ReplaceAllString(s, "${1}"+Mask+"%40")
	return pattern.ReplaceAllString(s, "${1}="+Mask)
}

// ParseError is what url.Parse (or url.ParseQuery) said about a URL, the
// problem without the pieces of the input it quotes: `invalid port ":pa"
// after host` may quote part of a password that holds a '/'.
func ParseError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return quotedString.ReplaceAllString(err.Error(), `"`+Mask+`"`)
}

// URL returns raw with its secrets masked (see the package comment). It
// never returns raw's secrets, whether or not raw parses as a URL.
func URL(raw string) string { return maskURL(raw, 0) }

// maxNesting bounds how deep URLs nested in parameter values are masked
// one by one; deeper ones are masked whole. Each level may mask its
// nested URLs twice (parsed, then scanned), so the work doubles per level.
const maxNesting = 4

func maskURL(raw string, depth int) string {
	if depth > maxNesting {
		return Mask
	}
	if u, err := url.Parse(raw); err == nil {
		out, keep := maskParsed(raw, u, depth)
		// An '@' the parser did not take for the end of the user
		// information is a password it misread: "u:12/ss@h" parses as
		// host u, port 12, path /ss@h.
		if maskUserinfo(out, keep) == out {
			return out
		}
	}
	s := maskUserinfo(raw, "")
	if u, err := url.Parse(s); err == nil {
		out, _ := maskParsed(s, u, depth)
		return out
	}
	return Text(s)
}

// maskParsed masks u, raw parsed, in its user information, its secret
// query parameters and the URLs nested in parameter values. It returns the
// URL (raw itself when nothing was masked, so stdout:// stays as written)
// and its user information as written there (or "").
func maskParsed(raw string, u *url.URL, depth int) (string, string) {
	q := maskQuery(u.RawQuery, depth)
	if u.User == nil && q == u.RawQuery {
		return raw, ""
	}
	u.RawQuery = q
	keep := ""
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else {
			u.User = url.User(Mask)
		}
		keep = u.User.String()
	}
	if u.Scheme == "" || u.Opaque != "" {
		keep = "" // the user information does not follow scheme://
	}
	return u.String(), keep
}

// maskQuery masks a raw query's secret parameters and the URLs nested in
// its values (at depth+1), keeping every other byte as written.
func maskQuery(raw string, depth int) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
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
		val, err := url.QueryUnescape(v)
		if err != nil {
			parts[i] = k + "=" + Text(v)
			continue
		}
		if strings.Contains(val, "://") {
			if m := maskURL(val, depth+1); m != val {
				parts[i] = k + "=" + url.QueryEscape(m)
			}
		}
	}
	return strings.Join(parts, "&")
}

// maskUserinfo masks, in s, everything between each "scheme://" and the
// last '@' before the next "scheme://" (or the end), and in text before
// the first "scheme://" everything up to its last '@'. The part after the
// first "://" is left alone when it starts with '/' (file:///PATH: no user
// information) or equals keep (user information already masked).
func maskUserinfo(s, keep string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return maskToLastAt(s)
	}
	start := schemeStart(s, i)
	var b strings.Builder
	b.WriteString(maskToLastAt(s[:start]))
	first := true
	for {
		b.WriteString(s[start : i+3])
		rest := s[i+3:]
		j := strings.Index(rest, "://")
		seg, next := rest, ""
		if j >= 0 {
			end := schemeStart(rest, j)
			seg, next = rest[:end], rest[end:]
		}
		if first && (strings.HasPrefix(seg, "/") || (keep != "" && strings.HasPrefix(seg, keep+"@") && !strings.Contains(seg[len(keep)+1:], "@"))) {
			b.WriteString(seg)
		} else {
			b.WriteString(maskToLastAt(seg))
		}
		if j < 0 {
			return b.String()
		}
		s, start, i, first = next, 0, strings.Index(next, "://"), false
	}
}

// schemeStart is where the scheme ending at s[i] ("://" at i) begins.
func schemeStart(s string, i int) int {
	for i > 0 && isSchemeByte(s[i-1]) {
		i--
	}
	return i
}

func isSchemeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// maskToLastAt replaces everything before s's last '@' by the mask.
func maskToLastAt(s string) string {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return s
	}
	return Mask + s[at:]
}
