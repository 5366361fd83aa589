package ddbjson

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// This file is the checked reader: any JSON spelling (whitespace, escapes,
// members in any order), every value checked, errors naming the attribute
// path. encoding/json tokenizes; it is the reader of last resort, which
// explains what the fast readers (scan.go) decline.

// UnmarshalItem parses DynamoDB JSON (as [AppendItem] writes it, or any
// spelling of the same JSON) back into
// an item. Every attribute value must be an object with exactly one of the
// type keys S, N, B, SS, NS, BS, M, L, NULL, BOOL; numbers must be decimal
// numbers, binary must be standard base64. Errors name the attribute path.
func UnmarshalItem(data []byte) (Item, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("item: %w", err)
	}
	if raw == nil {
		return nil, errors.New("item: null, want an object")
	}
	return decodeMap(raw, "")
}

func decodeMap(raw map[string]json.RawMessage, path string) (Item, error) {
	item := make(Item, len(raw))
	for k, v := range raw {
		p := k
		if path != "" {
			p = path + "." + k
		}
		av, err := decodeAV(v, p)
		if err != nil {
			return nil, err
		}
		item[k] = av
	}
	return item, nil
}

// UnmarshalAV parses one DynamoDB JSON attribute value such as {"N":"42"}.
func UnmarshalAV(data []byte) (types.AttributeValue, error) {
	return decodeAV(data, "value")
}

func decodeAV(data json.RawMessage, path string) (types.AttributeValue, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("attribute %q: want an object like {\"S\":\"...\"}", path)
	}
	if len(obj) != 1 {
		return nil, fmt.Errorf("attribute %q: want exactly one type key, got %d", path, len(obj))
	}
	for typ, v := range obj {
		bad := func(want string) error {
			return fmt.Errorf("attribute %q: %s: want %s", path, typ, want)
		}
		switch typ {
		case "S":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, bad("a string")
			}
			return &types.AttributeValueMemberS{Value: s}, nil
		case "N":
			var s string
			if json.Unmarshal(v, &s) != nil || !ValidNumber(s) {
				return nil, bad("a decimal number in a string")
			}
			return &types.AttributeValueMemberN{Value: s}, nil
		case "B":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, bad("a base64 string")
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, bad("a base64 string")
			}
			return &types.AttributeValueMemberB{Value: b}, nil
		case "BOOL":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return nil, bad("true or false")
			}
			return &types.AttributeValueMemberBOOL{Value: b}, nil
		case "NULL":
			var b bool
			if json.Unmarshal(v, &b) != nil || !b {
				return nil, bad("true")
			}
			return &types.AttributeValueMemberNULL{Value: true}, nil
		case "SS", "NS", "BS":
			return decodeSet(typ, v, bad)
		case "M":
			var m map[string]json.RawMessage
			if json.Unmarshal(v, &m) != nil || m == nil {
				return nil, bad("an object")
			}
			item, err := decodeMap(m, path)
			if err != nil {
				return nil, err
			}
			return &types.AttributeValueMemberM{Value: item}, nil
		case "L":
			return decodeList(v, path, bad)
		default:
			return nil, fmt.Errorf("attribute %q: unknown type key %q (want S, N, B, SS, NS, BS, M, L, NULL or BOOL)", path, typ)
		}
	}
	return nil, fmt.Errorf("attribute %q: want exactly one type key", path)
}

// decodeSet decodes the value v of a set attribute of type typ (SS, NS or
// BS); bad makes the error naming the attribute and what it wants.
func decodeSet(typ string, v json.RawMessage, bad func(want string) error) (types.AttributeValue, error) {
	var ss []string
	if json.Unmarshal(v, &ss) != nil || ss == nil {
		return nil, bad("an array of strings")
	}
	switch typ {
	case "SS":
		return &types.AttributeValueMemberSS{Value: ss}, nil
	case "NS":
		for _, n := range ss {
			if !ValidNumber(n) {
				return nil, bad("an array of decimal numbers in strings")
			}
		}
		return &types.AttributeValueMemberNS{Value: ss}, nil
	}
	bs := make([][]byte, len(ss))
	for i, s := range ss {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, bad("an array of base64 strings")
		}
		bs[i] = b
	}
	return &types.AttributeValueMemberBS{Value: bs}, nil
}

// decodeList decodes the value v of the list attribute at path; bad makes
// the error naming the attribute and what it wants.
func decodeList(v json.RawMessage, path string, bad func(want string) error) (types.AttributeValue, error) {
	var l []json.RawMessage
	if json.Unmarshal(v, &l) != nil || l == nil {
		return nil, bad("an array")
	}
	out := make([]types.AttributeValue, len(l))
	for i, e := range l {
		av, err := decodeAV(e, path+"["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		out[i] = av
	}
	return &types.AttributeValueMemberL{Value: out}, nil
}
