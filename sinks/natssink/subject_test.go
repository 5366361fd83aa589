package natssink

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// TestSubjectTokens: the escape keeps plain names and keys as they were
// and makes every other value one token no other value gives.
func TestSubjectTokens(t *testing.T) {
	tests := []struct{ value, want string }{
		// Unchanged from the old mapping: subscribers of plain names keep
		// their subjects.
		{"orders", "orders"},
		{"orders_v2", "orders_v2"},
		{"user#shard-1#000001", "user#shard-1#000001"},
		{"a-b:c/d@e+f=g", "a-b:c/d@e+f=g"},
		{"ünïcødé-日本", "ünïcødé-日本"},
		{"AAECAw", "AAECAw"},
		// Escaped: these used to become '_' and share subjects.
		{"orders.v2", "orders%2Ev2"},
		{"a b", "a%20b"},
		{"*", "%2A"},
		{">", "%3E"},
		{"%", "%25"},
		{"%2E", "%252E"},
		{"1.5", "1%2E5"},
		{"tab\there", "tab%09here"},
		{"cr\r\nlf", "cr%0D%0Alf"},
		{"nul\x00", "nul%00"},
		{"del\x7f", "del%7F"},
		{"bad\xffutf8", "bad%FFutf8"},
		{"nbsp\u00a0", "nbsp%C2%A0"},
		{"zwsp\u200b", "zwsp%E2%80%8B"},
		{"bom\ufeff", "bom%EF%BB%BF"},
		{"\u2028", "%E2%80%A8"},
		// A missing value and the value "_" differ.
		{"", "_"},
		{"_", "%5F"},
		{"__", "__"},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		var b strings.Builder
		appendToken(&b, tc.value, 1000)
		got := b.String()
		if got != tc.want {
			t.Errorf("token of %q = %q, want %q", tc.value, got, tc.want)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q share the token %q", other, tc.value, got)
		}
		seen[got] = tc.value
		if v, dig, err := decodeToken(got); err != nil || dig != nil || v != tc.value {
			t.Errorf("token %q decodes to %q (digest %x, %v), want %q", got, v, dig, err, tc.value)
		}
	}
}

// TestSubjectLongKeys is issue 19's item: keys at DynamoDB's limits (a
// 2048-byte binary hash key, a 1024-byte range key) under a template that
// names them. The subject stays within the cap, the long tokens become
// digests of the whole value, and keys that differ only in their last
// byte get different subjects.
func TestSubjectLongKeys(t *testing.T) {
	tmpl := mustSubject(t, "bk.{table}.{kind}.{pk}.{sk}")
	pk, sk := bytes.Repeat([]byte{0xab}, 2048), bytes.Repeat([]byte{0xcd}, 1024)
	ev := func(pk, sk []byte) *event.Event {
		return &event.Event{Table: "orders", Kind: event.Expired, Keys: event.Item{
			"pk": &types.AttributeValueMemberB{Value: pk},
			"sk": &types.AttributeValueMemberB{Value: sk},
		}}
	}
	for _, maxLen := range []int{0, 256, DefaultMaxSubject, MaxMaxSubject} {
		t.Run(fmt.Sprint(maxLen), func(t *testing.T) {
			cap := maxLen
			if cap == 0 {
				cap = DefaultMaxSubject
			}
			got := tmpl.render(ev(pk, sk), maxLen)
			if err := validSubject(got, cap); err != nil {
				t.Fatalf("subject %q: %v", got, err)
			}
			if again := tmpl.render(ev(pk, sk), maxLen); again != got {
				t.Fatalf("not stable: %q then %q", got, again)
			}
			toks := strings.Split(got, ".")
			for i, v := range map[int][]byte{3: pk, 4: sk} {
				_, dig, err := decodeToken(toks[i])
				want := sha256.Sum256([]byte(base64.RawURLEncoding.EncodeToString(v)))
				if err != nil || !bytes.Equal(dig, want[:]) {
					t.Fatalf("token %d %q: digest %x (%v), want the SHA-256 of the whole value", i, toks[i], dig, err)
				}
			}
			pk2 := bytes.Clone(pk)
			pk2[len(pk2)-1] ^= 1
			if other := tmpl.render(ev(pk2, sk), maxLen); other == got {
				t.Fatalf("keys differing in their last byte share the subject %q", got)
			}
		})
	}
}

// TestSubjectTablesDistinct: the tables and keys the old mapping merged.
func TestSubjectTablesDistinct(t *testing.T) {
	tmpl := mustSubject(t, "archiver.{table}.{kind}.{pk}")
	pairs := [][2]string{{"orders.v2", "orders_v2"}, {"a.b", "a_b"}, {"a b", "a_b"}, {"x*", "x_"}}
	for _, p := range pairs {
		for _, field := range []string{"table", "pk"} {
			subj := func(v string) string {
				e := &event.Event{Table: "t", Kind: event.Expired, Keys: event.Item{"pk": &types.AttributeValueMemberS{Value: "k"}}}
				if field == "table" {
					e.Table = v
				} else {
					e.Keys["pk"] = &types.AttributeValueMemberS{Value: v}
				}
				return tmpl.render(e, 0)
			}
			if a, b := subj(p[0]), subj(p[1]); a == b {
				t.Errorf("%s %q and %q share the subject %q", field, p[0], p[1], a)
			}
		}
	}
}

// TestMaxSubjectParam: max-subject is checked at Open, naming the
// parameter, before anything connects.
func TestMaxSubjectParam(t *testing.T) {
	tests := []struct{ url, want string }{
		{"nats://127.0.0.1:1?max-subject=0", "max-subject: 0 is out of range [1, 3840]"},
		{"nats://127.0.0.1:1?max-subject=4096", "max-subject: 4096 is out of range [1, 3840]"},
		{"nats://127.0.0.1:1?max-subject=big", `max-subject: "big" is not an integer`},
		{"nats://127.0.0.1:1?max-subject=200&subject=bk.{table}.{kind}.{pk}.{sk}", "max-subject: too small for subject"},
		{"nats://127.0.0.1:1?max-subject=5&subject=archiver.all", "max-subject: too small for subject"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			s, _, err := open(testkit.Ctx(t), tc.url, sinkapi.Options{})
			if err == nil {
				s.Close(testkit.Ctx(t))
				t.Fatal("Open succeeded")
			}
			var ce *sinkurl.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open error %v, want a *sinkurl.ConfigError containing %q", err, tc.want)
			}
		})
	}
	p, err := sinkurl.Parse("nats://h:1?max-subject=300")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ParseConfig(p); err != nil || c.MaxSubject != 300 {
		t.Fatalf("max-subject=300: %+v %v", c, err)
	}
}

// TestValidSubject: what checkMessage refuses before a publish.
func TestValidSubject(t *testing.T) {
	for _, tc := range []struct {
		subject string
		ok      bool
	}{
		{"a.b.c", true},
		{"a.%2E.%7E", true},
		{"", false},
		{"a..b", false},
		{".a", false},
		{"a.", false},
		{"a b", false},
		{"a.*", false},
		{"a.>", false},
		{"a\r\nPUB x 1", false},
		{"a\x7f", false},
		{strings.Repeat("a", 65), false},
		{strings.Repeat("a", 64), true},
	} {
		err := validSubject(tc.subject, 64)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, nats.ErrBadSubject)) {
			t.Errorf("validSubject(%q) = %v, want ok=%v (errors wrap nats.ErrBadSubject)", tc.subject, err, tc.ok)
		}
	}
}

// FuzzSubject: whatever the table and keys, the subject is valid and
// within the cap, and each placeholder's token gives its value back (or,
// for a digest token, the SHA-256 of the value), so distinct tables and
// keys never share a subject.
func FuzzSubject(f *testing.F) {
	f.Add("orders.v2", []byte("pk"), "sk", false, uint16(0))
	f.Add("orders_v2", []byte{0xff, 0}, "1.5", true, uint16(300))
	f.Add("_", bytes.Repeat([]byte{1}, 2048), strings.Repeat("é", 512), false, uint16(1024))
	f.Add("a%2Eb", []byte{}, "", false, uint16(3840))
	f.Add("t", []byte("x"), "%~AAAA", false, uint16(250))
	tmpl := mustSubject(f, "bk.{table}.{kind}.{pk}.{sk}")
	min := 12 + 4*digestToken
	f.Fuzz(func(t *testing.T, table string, pk []byte, sk string, skNum bool, maxLen uint16) {
		capLen := min + int(maxLen)%(MaxMaxSubject-min+1)
		var skv types.AttributeValue = &types.AttributeValueMemberS{Value: sk}
		if skNum {
			skv = &types.AttributeValueMemberN{Value: sk}
		}
		e := &event.Event{Table: table, Kind: event.Expired, Keys: event.Item{"pk": &types.AttributeValueMemberB{Value: pk}, "sk": skv}}
		got := tmpl.render(e, capLen)
		if err := validSubject(got, capLen); err != nil {
			t.Fatalf("subject %q: %v", got, err)
		}
		toks := strings.Split(got, ".")
		if len(toks) != 5 || toks[0] != "bk" || toks[2] != "expired" {
			t.Fatalf("subject %q does not have the template's five tokens", got)
		}
		pkText := ""
		if len(pk) > 0 {
			pkText = base64.RawURLEncoding.EncodeToString(pk)
		}
		for i, want := range map[int]string{1: table, 3: pkText, 4: sk} {
			v, dig, err := decodeToken(toks[i])
			if err != nil {
				t.Fatalf("token %q of %q: %v", toks[i], got, err)
			}
			sum := sha256.Sum256([]byte(want))
			if (dig == nil && v != want) || (dig != nil && !bytes.Equal(dig, sum[:])) {
				t.Fatalf("token %q decodes to %q (digest %x), want %q", toks[i], v, dig, want)
			}
		}
	})
}

// decodeToken inverts appendToken: the value of an escaped token, or the
// SHA-256 a digest token carries. It fails on anything appendToken cannot
// have written.
func decodeToken(tok string) (string, []byte, error) {
	switch tok {
	case "_":
		return "", nil, nil
	case "%5F":
		return "_", nil, nil
	}
	if i := strings.Index(tok, digestMark); i >= 0 {
		prefix, hash := tok[:i], tok[i+len(digestMark):]
		if _, err := url.PathUnescape(prefix); err != nil || len(prefix) > digestPrefix {
			return "", nil, fmt.Errorf("digest prefix %q: %v", prefix, err)
		}
		dig, err := base64.RawURLEncoding.DecodeString(hash)
		if err != nil || len(dig) != sha256.Size {
			return "", nil, fmt.Errorf("digest %q: %v", hash, err)
		}
		return "", dig, nil
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] == '%' && (i+2 >= len(tok) || !isUpperHex(tok[i+1]) || !isUpperHex(tok[i+2])) {
			return "", nil, fmt.Errorf("%q: '%%' not followed by two upper-case hex digits", tok)
		}
	}
	v, err := url.PathUnescape(tok)
	if err != nil {
		return "", nil, err
	}
	if v == "" || v == "_" {
		return "", nil, fmt.Errorf("%q: escaped form of a value written otherwise", tok)
	}
	var b strings.Builder
	appendEscaped(&b, v)
	if b.String() != tok {
		return "", nil, fmt.Errorf("%q is not the escape of %q (%q)", tok, v, b.String())
	}
	return v, nil, nil
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }
