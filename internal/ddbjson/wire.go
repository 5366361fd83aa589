package ddbjson

import (
	"encoding/base64"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Wire reads the attribute values of a DynamoDB Streams response into the
// values the SDK's decoder builds, field for field: any member order,
// whitespace and escapes, a later duplicate member replacing an earlier
// one, base64 as the SDK decodes it, {"NULL":false} kept as it is. It
// declines (reports false) whatever it does not recognise: an unknown
// type key, null, a value of the wrong JSON type, malformed JSON. Its
// strings point into the document (see [NewScanner]).
type Wire struct {
	Scanner

	// Slabs for the values a response holds thousands of: a few
	// allocations instead of one each.
	avS Slab[types.AttributeValueMemberS]
	avN Slab[types.AttributeValueMemberN]
}

// NewWire returns a Wire at the start of b (see [NewScanner]).
func NewWire(b []byte) Wire {
	return Wire{Scanner: NewScanner(b)}
}

// Slab hands out pointers into chunks of T, so that many small values
// cost a few allocations. The zero Slab is ready to use.
type Slab[T any] struct{ chunk []T }

// New returns a pointer to a zero T.
func (s *Slab[T]) New() *T {
	if len(s.chunk) == 0 {
		s.chunk = make([]T, 64)
	}
	p := &s.chunk[0]
	s.chunk = s.chunk[1:]
	return p
}

// Item reads an object of attribute values (an image, or a map's value).
func (d *Wire) Item() (Item, bool) {
	m := make(Item)
	ok := d.Object(func(key string) bool {
		av, ok := d.Value()
		m[key] = av
		return ok
	})
	return m, ok
}

// Value reads one attribute value: an object with exactly one member.
func (d *Wire) Value() (types.AttributeValue, bool) {
	var av types.AttributeValue
	members := 0
	ok := d.Object(func(key string) bool {
		members++
		var ok bool
		switch key {
		case "S":
			v := d.avS.New()
			v.Value, ok = d.Str()
			av = v
		case "N":
			v := d.avN.New()
			v.Value, ok = d.Str()
			av = v
		case "B":
			var b []byte
			b, ok = d.Base64()
			av = &types.AttributeValueMemberB{Value: b}
		case "BOOL":
			var b bool
			b, ok = d.Bool()
			av = &types.AttributeValueMemberBOOL{Value: b}
		case "NULL":
			var b bool
			b, ok = d.Bool()
			av = &types.AttributeValueMemberNULL{Value: b}
		case "SS", "NS":
			av, ok = d.strSet(key)
		case "BS":
			bs := make([][]byte, 0)
			ok = d.Array(func() bool {
				b, ok := d.Base64()
				bs = append(bs, b)
				return ok
			})
			av = &types.AttributeValueMemberBS{Value: bs}
		case "L":
			l := make([]types.AttributeValue, 0)
			ok = d.Array(func() bool {
				v, ok := d.Value()
				l = append(l, v)
				return ok
			})
			av = &types.AttributeValueMemberL{Value: l}
		case "M":
			var m Item
			m, ok = d.Item()
			av = &types.AttributeValueMemberM{Value: m}
		}
		return ok
	})
	return av, ok && members == 1
}

// strSet reads the array of an SS or NS (typ).
func (d *Wire) strSet(typ string) (types.AttributeValue, bool) {
	ss := make([]string, 0)
	ok := d.Array(func() bool {
		s, ok := d.Str()
		ss = append(ss, s)
		return ok
	})
	if typ == "SS" {
		return &types.AttributeValueMemberSS{Value: ss}, ok
	}
	return &types.AttributeValueMemberNS{Value: ss}, ok
}

// Base64 reads a base64 string, decoded as the SDK decodes it.
func (d *Scanner) Base64() ([]byte, bool) {
	s, ok := d.Str()
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}
