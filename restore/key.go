package restore

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// KeyMatch is one --key ATTR=VALUE: the item's attribute ATTR must equal
// VALUE.
//
// A plain VALUE (userId=abc) matches a string attribute with exactly that
// text or, when VALUE is a number, a number attribute equal to it as a
// decimal (userId=42 matches N 42, N 42.0 and S "42"). A typed VALUE
// matches one type only: S:abc, N:42, B:base64. A string that itself
// starts with S:, N: or B: is written typed (S:S:abc).
type KeyMatch struct {
	Attr  string
	Value string
	// Type is "S", "N" or "B" for a typed value, "" for a plain one.
	Type string
	bin  []byte
}

// ParseKey parses one --key ATTR=VALUE.
func ParseKey(s string) (KeyMatch, error) {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return KeyMatch{}, fmt.Errorf("%q: want ATTR=VALUE (e.g. userId=abc or userId=S:abc)", s)
	}
	k := KeyMatch{Attr: name, Value: val}
	if len(val) >= 2 && val[1] == ':' && strings.IndexByte("SNB", val[0]) >= 0 {
		k.Type, k.Value = val[:1], val[2:]
	}
	switch k.Type {
	case "N":
		if !event.ValidNumber(k.Value) {
			return KeyMatch{}, fmt.Errorf("%q: %q is not a number", s, k.Value)
		}
	case "B":
		b, err := base64.StdEncoding.DecodeString(k.Value)
		if err != nil {
			return KeyMatch{}, fmt.Errorf("%q: B: wants base64: %v", s, err)
		}
		k.bin = b
	}
	return k, nil
}

// Match reports whether item's attribute equals the key's value.
func (k KeyMatch) Match(item event.Item) bool {
	v, ok := item[k.Attr]
	if !ok {
		return false
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return (k.Type == "" || k.Type == "S") && x.Value == k.Value
	case *types.AttributeValueMemberN:
		if k.Type != "" && k.Type != "N" {
			return false
		}
		r, ok := compareNumbers(x.Value, k.Value)
		return ok && r == 0
	case *types.AttributeValueMemberB:
		return k.Type == "B" && string(x.Value) == string(k.bin)
	}
	return false
}

// Selection is what restore and replay take from an archive beyond the
// reader's own pruning (tables, kinds, time): --key and --where.
type Selection struct {
	// Keys: every attribute named must match; several --key flags on the
	// same attribute are alternatives (--key user=a --key user=b selects
	// both users).
	Keys  []KeyMatch
	Where *Where
}

// Match reports whether the event's image is selected.
func (s *Selection) Match(e *event.Event) bool {
	if s == nil {
		return true
	}
	img := e.Image()
	if len(s.Keys) > 0 {
		byAttr := map[string]bool{}
		for _, k := range s.Keys {
			byAttr[k.Attr] = byAttr[k.Attr] || k.Match(img)
		}
		for _, ok := range byAttr {
			if !ok {
				return false
			}
		}
	}
	return s.Where.Match(img)
}
