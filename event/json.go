package event

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// This file is the one place that renders items and events as JSON.
//
// DynamoDB JSON ([MarshalItem]) is the attribute-value form of DynamoDB's own
// APIs and S3 exports: {"name":{"S":"x"},"n":{"N":"12.50"}}. It is lossless:
// numbers stay the decimal strings DynamoDB stored, binary is base64, sets
// stay sets. Attribute names (and map keys) are written in sorted order, so
// the same item always renders to the same bytes.
//
// Plain JSON ([PlainJSON]) is what a subscriber who does not know DynamoDB
// expects: {"name":"x","n":12.50}. Numbers are JSON number literals holding
// exactly DynamoDB's digits (no float rounding), binary is a base64 string,
// sets are arrays, NULL is null. It cannot tell a string set from a list of
// strings, so it is not meant for restoring items.
//
// The archive line ([AppendLine], [DecodeLine]) is one JSON object per event:
//
//	{"Item":{...},"Keys":{...},"OldImage":{...},"Metadata":{...}}
//
// described in full on [AppendLine].

// MarshalItem renders item as DynamoDB JSON. A nil item renders as null.
func MarshalItem(item Item) []byte {
	return AppendItem(nil, item)
}

// AppendItem appends the DynamoDB JSON of item to dst and returns the
// extended buffer.
func AppendItem(dst []byte, item Item) []byte {
	return appendObject(dst, item, appendAV)
}

// appendObject appends item as a JSON object with its attributes in name
// order (so an event always renders to the same bytes), each value
// rendered by value. A nil item renders as null.
func appendObject(dst []byte, item Item, value func([]byte, types.AttributeValue) []byte) []byte {
	if item == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	var arr [16]attr
	for i, a := range sortedAttrs(item, arr[:0]) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, a.name)
		dst = append(dst, ':')
		dst = value(dst, a.value)
	}
	return append(dst, '}')
}

// MarshalAttributeValue renders one attribute value as DynamoDB JSON, e.g.
// {"N":"42"}.
func MarshalAttributeValue(av types.AttributeValue) []byte {
	return appendAV(nil, av)
}

func appendAV(dst []byte, av types.AttributeValue) []byte {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		dst = append(dst, `{"S":`...)
		dst = appendString(dst, v.Value)
	case *types.AttributeValueMemberN:
		dst = append(dst, `{"N":`...)
		dst = appendString(dst, v.Value)
	case *types.AttributeValueMemberB:
		dst = append(dst, `{"B":`...)
		dst = appendBase64(dst, v.Value)
	case *types.AttributeValueMemberBOOL:
		if v.Value {
			return append(dst, `{"BOOL":true}`...)
		}
		return append(dst, `{"BOOL":false}`...)
	case *types.AttributeValueMemberNULL:
		return append(dst, `{"NULL":true}`...)
	case *types.AttributeValueMemberSS:
		dst = append(dst, `{"SS":`...)
		dst = appendStrings(dst, v.Value)
	case *types.AttributeValueMemberNS:
		dst = append(dst, `{"NS":`...)
		dst = appendStrings(dst, v.Value)
	case *types.AttributeValueMemberBS:
		dst = append(dst, `{"BS":[`...)
		for i, b := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendBase64(dst, b)
		}
		dst = append(dst, ']')
	case *types.AttributeValueMemberM:
		dst = append(dst, `{"M":`...)
		dst = AppendItem(dst, nonNil(v.Value))
	case *types.AttributeValueMemberL:
		dst = append(dst, `{"L":[`...)
		for i, e := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendAV(dst, e)
		}
		dst = append(dst, ']')
	default:
		// An unknown member (a future SDK type) or nil: keep the output
		// valid JSON and visibly marked rather than dropping the attribute.
		return append(dst, `{"NULL":true}`...)
	}
	return append(dst, '}')
}

func nonNil(m Item) Item {
	if m == nil {
		return Item{}
	}
	return m
}

// PlainJSON renders item as ordinary JSON: N as a JSON number literal with
// DynamoDB's exact digits, B as a base64 string, sets as arrays, NULL as
// null. A nil item renders as null.
func PlainJSON(item Item) []byte {
	return AppendPlainJSON(nil, item)
}

// AppendPlainJSON appends the plain JSON of item to dst.
func AppendPlainJSON(dst []byte, item Item) []byte {
	return appendObject(dst, item, appendPlain)
}

func appendPlain(dst []byte, av types.AttributeValue) []byte {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return appendString(dst, v.Value)
	case *types.AttributeValueMemberN:
		return appendNumber(dst, v.Value)
	case *types.AttributeValueMemberB:
		return appendBase64(dst, v.Value)
	case *types.AttributeValueMemberBOOL:
		return strconv.AppendBool(dst, v.Value)
	case *types.AttributeValueMemberNULL:
		return append(dst, "null"...)
	case *types.AttributeValueMemberSS:
		return appendStrings(dst, v.Value)
	case *types.AttributeValueMemberNS:
		dst = append(dst, '[')
		for i, n := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendNumber(dst, n)
		}
		return append(dst, ']')
	case *types.AttributeValueMemberBS:
		dst = append(dst, '[')
		for i, b := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendBase64(dst, b)
		}
		return append(dst, ']')
	case *types.AttributeValueMemberM:
		return AppendPlainJSON(dst, nonNil(v.Value))
	case *types.AttributeValueMemberL:
		dst = append(dst, '[')
		for i, e := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPlain(dst, e)
		}
		return append(dst, ']')
	}
	return append(dst, "null"...)
}

// appendNumber writes a DynamoDB number as a JSON number literal with the
// same digits. DynamoDB's own spellings that JSON does not allow (a leading
// "+", ".5", "5.", leading zeros) are repaired without changing the value;
// anything that is not a number at all is written as a string so the output
// stays valid JSON.
func appendNumber(dst []byte, n string) []byte {
	if IsJSONNumber(n) {
		return append(dst, n...)
	}
	if fixed, ok := jsonNumber(n); ok {
		return append(dst, fixed...)
	}
	return appendString(dst, n)
}

// IsJSONNumber reports whether s matches JSON's number grammar (RFC 8259:
// no leading zeros, no '+', digits after '.' and after the exponent).
func IsJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '0' {
		i++
	} else if s[i] >= '1' && s[i] <= '9' {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return exponentRest(s, i)
}

// jsonNumber rewrites a valid DynamoDB number into JSON's grammar.
func jsonNumber(s string) (string, bool) {
	if !ValidNumber(s) {
		return "", false
	}
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i:]
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	out := intPart
	if hasDot && frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	out += exp
	return out, IsJSONNumber(out)
}

// ValidNumber reports whether s is a decimal number as DynamoDB accepts it
// in an N value: an optional sign, digits with an optional decimal point, an
// optional exponent. It checks the spelling only, not DynamoDB's range and
// precision limits.
func ValidNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	return exponentRest(s, i)
}

type attr struct {
	name  string
	value types.AttributeValue
}

// sortedAttrs returns m's attributes sorted by name, in buf when it is
// large enough (callers pass a stack array, so small items allocate
// nothing and no attribute is looked up twice).
func sortedAttrs(m Item, buf []attr) []attr {
	attrs := buf[:0]
	for k, v := range m {
		attrs = append(attrs, attr{k, v})
	}
	switch {
	case len(attrs) <= 1:
	case len(attrs) <= 16:
		// Insertion sort: items are small, and comparing in place beats
		// the generic sort's calls through a comparison function.
		for i := 1; i < len(attrs); i++ {
			for j := i; j > 0 && attrs[j].name < attrs[j-1].name; j-- {
				attrs[j], attrs[j-1] = attrs[j-1], attrs[j]
			}
		}
	default:
		slices.SortFunc(attrs, func(a, b attr) int { return strings.Compare(a.name, b.name) })
	}
	return attrs
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// appendBase64 writes b as a quoted standard base64 string, the bytes
// base64.StdEncoding writes. Binary attributes are often the bulk of an
// item, so it encodes six bytes per step from one 8-byte load (about a
// third of the standard encoder's instructions); the standard encoder
// writes the last bytes and the padding.
func appendBase64(dst []byte, b []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(b))
	dst = slices.Grow(dst, n+2)
	dst = append(dst, '"')
	start := len(dst)
	dst = dst[:start+n]
	out := dst[start:]
	i, o := 0, 0
	for ; i+8 <= len(b) && o+8 <= len(out); i, o = i+6, o+8 {
		x := binary.BigEndian.Uint64(b[i:])
		w := out[o : o+8 : o+8]
		w[0] = base64Std[x>>58]
		w[1] = base64Std[x>>52&63]
		w[2] = base64Std[x>>46&63]
		w[3] = base64Std[x>>40&63]
		w[4] = base64Std[x>>34&63]
		w[5] = base64Std[x>>28&63]
		w[6] = base64Std[x>>22&63]
		w[7] = base64Std[x>>16&63]
	}
	base64.StdEncoding.Encode(out[o:], b[i:])
	return append(dst, '"')
}

// base64Std is the alphabet of base64.StdEncoding.
const base64Std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

const hexDigits = "0123456789abcdef"

// jsonSafe[c] reports whether appendString copies byte c as it is: ASCII
// from 0x20 up except '"' and '\\'. It is a constant table.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString writes s as a JSON string. Invalid UTF-8 (which DynamoDB
// never stores) becomes U+FFFD, as encoding/json does.
func appendString(dst []byte, s string) []byte {
	// Most strings (names, keys, ARNs, numbers) need no escaping: find out
	// in one pass, then copy them whole.
	i := 0
	for i+8 <= len(s) && !needsEscape8(load8(s[i:i+8])) {
		i += 8
	}
	for i < len(s) && jsonSafe[s[i]] {
		i++
	}
	if i == len(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return appendStringEscaped(dst, s, i)
}

// appendStringEscaped is appendString for a string whose bytes before i
// need no escaping and whose byte i may.
func appendStringEscaped(dst []byte, s string, i int) []byte {
	dst = append(dst, '"')
	start := 0
	for i < len(s) {
		// Fast path: skip 8 bytes at a time while none of them needs
		// escaping or UTF-8 checking (control, '"', '\\', non-ASCII).
		for i+8 <= len(s) && !needsEscape8(load8(s[i:i+8])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// load8 packs the 8 bytes of w (little-endian): one load, since w's length
// is known to the compiler.
func load8(w string) uint64 {
	_ = w[7]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// needsEscape8 reports whether any of the 8 bytes packed in x is below
// 0x20, '"', '\\' or 0x80 and above. It may not say which; the caller then
// looks at the bytes one by one.
func needsEscape8(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	less := (x - lo*0x20) & ^x // a byte below 0x20
	q := x ^ (lo * '"')        // a zero byte where x has '"'
	bs := x ^ (lo * '\\')      // a zero byte where x has '\\'
	zero := (q-lo) & ^q | (bs-lo)&^bs
	return (less|zero|x)&hi != 0
}

// UnmarshalItem parses DynamoDB JSON (as [MarshalItem] writes it) back into
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

// UnmarshalAttributeValue parses one DynamoDB JSON attribute value such as
// {"N":"42"}.
func UnmarshalAttributeValue(data []byte) (types.AttributeValue, error) {
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

// AppendLine appends the archive line of e, followed by '\n', to dst. The
// line is one JSON object:
//
//	{
//	  "Item":     DynamoDB JSON of e.Image(): the old image of a REMOVE, the
//	              new image otherwise (the keys alone under KEYS_ONLY),
//	  "Keys":     DynamoDB JSON of the key attributes,
//	  "OldImage": DynamoDB JSON of the old image, only for a MODIFY that
//	              carries both images,
//	  "Metadata": {
//	    "kind":           "expired" | "deleted" | "inserted" | "modified",
//	    "table":          table name,
//	    "eventID":        the stream record's event ID,
//	    "eventName":      "INSERT" | "MODIFY" | "REMOVE",
//	    "sequenceNumber": decimal string,
//	    "shardId", "streamArn",
//	    "region":         the AWS Region of the stream the record was read
//	                      from (the streamArn's; left out when it names
//	                      none),
//	    "approximateCreationDateTime": RFC 3339 with nanoseconds, UTC,
//	    "deletionTime":   same as above, only for REMOVE events,
//	    "sizeBytes":      the record's size as the stream reported it,
//	    "ttlAttribute":   the table's TTL attribute name (when known),
//	    "ttlValue":       its value as a decimal string (when known),
//	    "ttlTime":        ttlValue as RFC 3339 (when known),
//	    "ttlLagSeconds":  deletion time minus TTL time, a JSON number with
//	                      up to nine decimals (whenever ttlTime and
//	                      approximateCreationDateTime are both there, 0
//	                      included),
//	    "deletedBy":      who deleted the item, only for REMOVE events:
//	                      "dynamodb-ttl" (DynamoDB's TTL process) or
//	                      "other" (any other principal: an application,
//	                      a sweeper; the stream does not name it),
//	    "image":          "keys-only" when the stream carried no image of
//	                      the item (view type KEYS_ONLY, or NEW_IMAGE for
//	                      a REMOVE): "Item" then holds the keys alone
//	  }
//	}
//
// "Item" alone, fed to PutItem, restores the exact item: DynamoDB JSON keeps
// every type and every digit. Keys within objects are sorted, so one event
// always renders to the same bytes. [DecodeLine] reads a line back.
func AppendLine(dst []byte, e *Event) []byte {
	return appendLineRest(appendLineHead(dst, e), e)
}

// appendLineHead appends the start of e's line, {"Item":...,"Keys":...,
// which is what an expiry's message ID is computed from (see
// [IDHasher]).
func appendLineHead(dst []byte, e *Event) []byte {
	dst = append(dst, `{"Item":`...)
	dst = AppendItem(dst, nonNil(e.Image()))
	dst = append(dst, `,"Keys":`...)
	return AppendItem(dst, nonNil(e.Keys))
}

// appendLineRest appends the rest of e's line after appendLineHead's
// part: OldImage, Metadata, DeadLetter and the newline.
func appendLineRest(dst []byte, e *Event) []byte {
	if e.EventName == "MODIFY" && e.OldImage != nil && e.NewImage != nil {
		dst = append(dst, `,"OldImage":`...)
		dst = AppendItem(dst, e.OldImage)
	}
	dst = append(dst, `,"Metadata":{"kind":`...)
	dst = appendString(dst, string(e.Kind))
	dst = append(dst, `,"table":`...)
	dst = appendString(dst, e.Table)
	dst = append(dst, `,"eventID":`...)
	dst = appendString(dst, e.EventID)
	dst = append(dst, `,"eventName":`...)
	dst = appendString(dst, e.EventName)
	dst = append(dst, `,"sequenceNumber":`...)
	dst = appendString(dst, e.SequenceNumber)
	dst = append(dst, `,"shardId":`...)
	dst = appendString(dst, e.ShardID)
	dst = append(dst, `,"streamArn":`...)
	dst = appendString(dst, e.StreamARN)
	if e.Region != "" {
		dst = append(dst, `,"region":`...)
		dst = appendString(dst, e.Region)
	}
	if !e.ApproximateCreationTime.IsZero() {
		dst = append(dst, `,"approximateCreationDateTime":`...)
		start := len(dst)
		dst = appendTime(dst, e.ApproximateCreationTime)
		if e.isRemove() {
			ts := dst[start:]
			dst = append(dst, `,"deletionTime":`...)
			dst = append(dst, ts...)
		}
	}
	if e.SizeBytes != 0 {
		dst = append(dst, `,"sizeBytes":`...)
		dst = strconv.AppendInt(dst, e.SizeBytes, 10)
	}
	if e.TTLAttribute != "" {
		dst = append(dst, `,"ttlAttribute":`...)
		dst = appendString(dst, e.TTLAttribute)
	}
	if e.TTLValue != "" {
		dst = append(dst, `,"ttlValue":`...)
		dst = appendString(dst, e.TTLValue)
	}
	if !e.TTLTime.IsZero() {
		dst = append(dst, `,"ttlTime":`...)
		dst = appendTime(dst, e.TTLTime)
	}
	if e.TTLLag != 0 || (!e.TTLTime.IsZero() && !e.ApproximateCreationTime.IsZero()) {
		// Known whenever both times are: a lag of 0 is written as 0.
		dst = append(dst, `,"ttlLagSeconds":`...)
		dst = appendSeconds(dst, e.TTLLag)
	}
	if e.DeletedBy != "" {
		dst = append(dst, `,"deletedBy":`...)
		dst = appendString(dst, e.DeletedBy)
	}
	if e.KeysOnly() {
		dst = append(dst, `,"image":"`+ImageKeysOnly+`"`...)
	}
	dst = append(dst, '}')
	if e.DeadLetter != nil {
		dst = appendDeadLetter(dst, e.DeadLetter)
	}
	return append(dst, "}\n"...)
}

// appendDeadLetter writes the line's "DeadLetter" member (keys sorted).
// Record is written as the JSON it holds; bytes that are not valid JSON
// are written as a string instead, so the line always parses.
func appendDeadLetter(dst []byte, d *DeadLetter) []byte {
	dst = append(dst, `,"DeadLetter":{"attempts":`...)
	dst = strconv.AppendInt(dst, int64(d.Attempts), 10)
	dst = append(dst, `,"error":`...)
	dst = appendString(dst, d.Error)
	if !d.FirstFailure.IsZero() {
		dst = append(dst, `,"firstFailure":`...)
		dst = appendTime(dst, d.FirstFailure)
	}
	dst = append(dst, `,"reason":`...)
	dst = appendString(dst, d.Reason)
	if d.Record != nil {
		dst = append(dst, `,"record":`...)
		if json.Valid(d.Record) {
			dst = append(dst, d.Record...)
		} else {
			dst = appendString(dst, string(d.Record))
		}
	}
	dst = append(dst, `,"sink":`...)
	dst = appendString(dst, d.Sink)
	return append(dst, '}')
}

// appendTime writes t as a quoted RFC 3339 UTC timestamp with nanoseconds,
// exactly as t.UTC().Format(time.RFC3339Nano) would (trailing zeros of the
// fraction dropped), without its general formatting machinery.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, time.RFC3339Nano)
		return append(dst, '"')
	}
	hour, minute, sec := t.Clock()
	dst = append(dst, '"',
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10))
	dst = appendFraction(dst, uint32(t.Nanosecond()))
	return append(dst, 'Z', '"')
}

// appendFraction writes ns (below 1e9) as "." and nine digits without
// trailing zeros; nothing when ns is 0.
func appendFraction(dst []byte, ns uint32) []byte {
	if ns == 0 {
		return dst
	}
	var b [10]byte
	b[0] = '.'
	for i := 9; i >= 1; i-- {
		b[i] = byte('0' + ns%10)
		ns /= 10
	}
	n := 10
	for b[n-1] == '0' {
		n--
	}
	return append(dst, b[:n]...)
}

// MarshalLine returns the archive line of e without the trailing newline.
func MarshalLine(e *Event) []byte {
	b := AppendLine(nil, e)
	return b[:len(b)-1]
}

func (e *Event) isRemove() bool {
	return e.EventName == "REMOVE" || (e.EventName == "" && (e.Kind == Expired || e.Kind == Deleted))
}

// appendSeconds writes d as exact decimal seconds (up to nine decimals).
func appendSeconds(dst []byte, d time.Duration) []byte {
	u := uint64(d)
	if d < 0 {
		dst = append(dst, '-')
		u = uint64(-d) // wraps correctly for MinInt64
	}
	dst = strconv.AppendUint(dst, u/1e9, 10)
	return appendFraction(dst, uint32(u%1e9))
}

// parseSeconds reads decimal seconds back into a Duration exactly.
func parseSeconds(n json.Number) (time.Duration, error) {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return 0, fmt.Errorf("%q is not a number", n)
	}
	r.Mul(r, big.NewRat(1e9, 1))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, fmt.Errorf("%q is not a duration in seconds with at most nine decimals", n)
	}
	return time.Duration(r.Num().Int64()), nil
}

type lineMeta struct {
	Kind                        Kind        `json:"kind"`
	Table                       string      `json:"table"`
	EventID                     string      `json:"eventID"`
	EventName                   string      `json:"eventName"`
	SequenceNumber              string      `json:"sequenceNumber"`
	ShardID                     string      `json:"shardId"`
	StreamARN                   string      `json:"streamArn"`
	Region                      string      `json:"region"`
	ApproximateCreationDateTime string      `json:"approximateCreationDateTime"`
	DeletionTime                string      `json:"deletionTime"`
	SizeBytes                   int64       `json:"sizeBytes"`
	TTLAttribute                string      `json:"ttlAttribute"`
	TTLValue                    string      `json:"ttlValue"`
	TTLTime                     string      `json:"ttlTime"`
	TTLLagSeconds               json.Number `json:"ttlLagSeconds"`
	DeletedBy                   string      `json:"deletedBy"`
	Image                       string      `json:"image"`
}

type lineDeadLetter struct {
	Attempts     int             `json:"attempts"`
	Error        string          `json:"error"`
	FirstFailure string          `json:"firstFailure"`
	Reason       string          `json:"reason"`
	Record       json.RawMessage `json:"record"`
	Sink         string          `json:"sink"`
}

type lineJSON struct {
	Item       json.RawMessage `json:"Item"`
	Keys       json.RawMessage `json:"Keys"`
	OldImage   json.RawMessage `json:"OldImage"`
	Metadata   *lineMeta       `json:"Metadata"`
	DeadLetter *lineDeadLetter `json:"DeadLetter"`
}

// DecodeLine parses one archive line (as [AppendLine] writes it; a trailing
// newline is allowed) back into an event. The image lands where it came
// from: OldImage for a REMOVE, NewImage otherwise (plus OldImage for a
// MODIFY that carried both). Errors name the field and the problem.
func DecodeLine(line []byte) (Event, error) {
	var l lineJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&l); err != nil {
		return Event{}, fmt.Errorf("archive line: %w", err)
	}
	if dec.More() {
		return Event{}, errors.New("archive line: more than one JSON value")
	}
	if l.Metadata == nil {
		return Event{}, errors.New("archive line: Metadata: missing")
	}
	if isNull(l.Item) {
		return Event{}, errors.New("archive line: Item: missing")
	}
	e, err := lineEvent(l.Metadata, l.DeadLetter)
	if err != nil {
		return Event{}, err
	}
	if err := decodeLineImages(&e, &l); err != nil {
		return Event{}, err
	}
	return e, nil
}

// lineEvent checks a line's Metadata (and DeadLetter, when the line has
// one) and returns the event they describe, without its images.
func lineEvent(m *lineMeta, dl *lineDeadLetter) (Event, error) {
	var err error
	e := Event{
		Kind:           m.Kind,
		Table:          m.Table,
		EventID:        m.EventID,
		EventName:      m.EventName,
		SequenceNumber: m.SequenceNumber,
		ShardID:        m.ShardID,
		StreamARN:      m.StreamARN,
		Region:         m.Region,
		SizeBytes:      m.SizeBytes,
		TTLAttribute:   m.TTLAttribute,
		TTLValue:       m.TTLValue,
		DeletedBy:      m.DeletedBy,
	}
	if dl != nil {
		if e.DeadLetter, err = decodeDeadLetter(dl); err != nil {
			return Event{}, err
		}
	}
	if !e.Kind.Valid() && (e.Kind != Undecodable || e.DeadLetter == nil) {
		return Event{}, fmt.Errorf("archive line: Metadata.kind: %q is not one of expired, deleted, inserted, modified", m.Kind)
	}
	switch e.EventName {
	case "INSERT", "MODIFY", "REMOVE", "":
	default:
		return Event{}, fmt.Errorf("archive line: Metadata.eventName: %q is not INSERT, MODIFY or REMOVE", m.EventName)
	}
	if e.SequenceNumber != "" && strings.Trim(e.SequenceNumber, "0123456789") != "" {
		return Event{}, fmt.Errorf("archive line: Metadata.sequenceNumber: %q is not a decimal number", m.SequenceNumber)
	}
	if err := checkDeletedBy(&e); err != nil {
		return Event{}, err
	}
	if e.Region == "" {
		e.Region = RegionOf(e.StreamARN) // a line written before lines named it
	} else if !ValidRegion(e.Region) {
		return Event{}, fmt.Errorf("archive line: Metadata.region: %q is not a Region name", m.Region)
	}
	if m.Image != "" && m.Image != ImageKeysOnly {
		return Event{}, fmt.Errorf("archive line: Metadata.image: %q is not %s", m.Image, ImageKeysOnly)
	}
	if e.TTLValue != "" && !ValidNumber(e.TTLValue) {
		return Event{}, fmt.Errorf("archive line: Metadata.ttlValue: %q is not a number", m.TTLValue)
	}
	if m.ApproximateCreationDateTime != "" {
		if e.ApproximateCreationTime, err = time.Parse(time.RFC3339Nano, m.ApproximateCreationDateTime); err != nil {
			return Event{}, fmt.Errorf("archive line: Metadata.approximateCreationDateTime: %w", err)
		}
	}
	if m.TTLTime != "" {
		if e.TTLTime, err = time.Parse(time.RFC3339Nano, m.TTLTime); err != nil {
			return Event{}, fmt.Errorf("archive line: Metadata.ttlTime: %w", err)
		}
	}
	if m.TTLLagSeconds != "" {
		if e.TTLLag, err = parseSeconds(m.TTLLagSeconds); err != nil {
			return Event{}, fmt.Errorf("archive line: Metadata.ttlLagSeconds: %w", err)
		}
	}
	return e, nil
}

// decodeLineImages decodes the line's Item, Keys and OldImage into e: the
// Item is the keys under KEYS_ONLY, the old image of a REMOVE and the new
// image otherwise.
func decodeLineImages(e *Event, l *lineJSON) error {
	item, err := UnmarshalItem(l.Item)
	if err != nil {
		return fmt.Errorf("archive line: Item: %w", err)
	}
	if !isNull(l.Keys) {
		if e.Keys, err = UnmarshalItem(l.Keys); err != nil {
			return fmt.Errorf("archive line: Keys: %w", err)
		}
	}
	switch {
	case l.Metadata.Image == ImageKeysOnly:
		// The stream carried no image: Item is the keys.
		if e.Keys == nil {
			e.Keys = item
		}
	case e.isRemove():
		e.OldImage = item
	default:
		e.NewImage = item
	}
	if !isNull(l.OldImage) {
		if e.OldImage, err = UnmarshalItem(l.OldImage); err != nil {
			return fmt.Errorf("archive line: OldImage: %w", err)
		}
	}
	return nil
}

// checkDeletedBy checks a line's Metadata.deletedBy: one of the two
// values, and only on a REMOVE.
func checkDeletedBy(e *Event) error {
	switch e.DeletedBy {
	case "":
		return nil
	case DeletedByTTL, DeletedByOther:
	default:
		return fmt.Errorf("archive line: Metadata.deletedBy: %q is not %s or %s", e.DeletedBy, DeletedByTTL, DeletedByOther)
	}
	if !e.isRemove() {
		return fmt.Errorf("archive line: Metadata.deletedBy: set on a %s event (only a REMOVE has one)", cmp.Or(e.EventName, string(e.Kind)))
	}
	return nil
}

// decodeDeadLetter checks a line's "DeadLetter" member.
func decodeDeadLetter(d *lineDeadLetter) (*DeadLetter, error) {
	out := &DeadLetter{Sink: d.Sink, Reason: d.Reason, Error: d.Error, Attempts: d.Attempts}
	switch d.Reason {
	case ReasonPermanent, ReasonRetryFor, ReasonUndecodable:
	default:
		return nil, fmt.Errorf("archive line: DeadLetter.reason: %q is not one of permanent, retry_for, undecodable", d.Reason)
	}
	if d.Attempts < 0 {
		return nil, fmt.Errorf("archive line: DeadLetter.attempts: %d is negative", d.Attempts)
	}
	if d.FirstFailure != "" {
		t, err := time.Parse(time.RFC3339Nano, d.FirstFailure)
		if err != nil {
			return nil, fmt.Errorf("archive line: DeadLetter.firstFailure: %w", err)
		}
		out.FirstFailure = t
	}
	if !isNull(d.Record) {
		out.Record = append([]byte(nil), d.Record...)
	}
	return out, nil
}

func isNull(r json.RawMessage) bool {
	return len(r) == 0 || string(bytes.TrimSpace(r)) == "null"
}

// exponentRest reports whether s[i:] is empty or an exponent (e or E, an
// optional sign, at least one digit) that ends the string.
func exponentRest(s string, i int) bool {
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(s)
}
