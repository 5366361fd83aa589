// Package ddbjson is the one reader and writer of DynamoDB JSON, the
// attribute-value form of DynamoDB's own APIs, its streams and S3 exports:
// {"name":{"S":"x"},"n":{"N":"12.50"},"gone":{"NULL":true}}. It is lossless:
// numbers stay the decimal strings DynamoDB stored, binary is base64, sets
// stay sets.
//
// The writer ([AppendItem], [AppendAV], [AppendPlain], [AppendString],
// [AppendBase64]) renders the canonical form: attribute names and map keys
// in sorted order, strings escaped as encoding/json escapes them, base64 in
// its one standard form, so the same item always renders to the same bytes.
//
// The readers take three kinds of input:
//
//   - Wire ([Wire]): a GetRecords response as DynamoDB Streams sends it,
//     read into the same values the SDK's decoder builds (whitespace,
//     escapes, members in any order); whatever it does not recognise it
//     declines, for the SDK to decode.
//   - Canonical ([Canonical]): only what the writer writes, byte for byte
//     (no whitespace, no escapes, names strictly ascending, strict base64),
//     read in one pass; anything else is declined, for the checked reader.
//   - Checked ([UnmarshalItem], [UnmarshalAV]): any spelling of the JSON,
//     every value checked, errors naming the attribute path.
//
// Both fast readers are one [Scanner] over the bytes: the wire reader calls
// its whitespace-tolerant methods, the canonical one its exact ones. Fuzz
// tests hold the writer to encoding/json and encoding/base64, the wire
// reader to the SDK's decoder and the canonical reader to the checked one.
//
// It imports the standard library and the SDK's stream types only; the
// engine keeps its own reader (docs/DESIGN.md says why).
package ddbjson

import "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

// Item is an item, or a map's value: attribute names to values.
type Item = map[string]types.AttributeValue

// The type keys of DynamoDB JSON, {"S":"x"} and so on: the one place
// outside the engine that names them (internal/housetest holds others to
// that).
const (
	TypeS    = "S"
	TypeN    = "N"
	TypeB    = "B"
	TypeBOOL = "BOOL"
	TypeNULL = "NULL"
	TypeSS   = "SS"
	TypeNS   = "NS"
	TypeBS   = "BS"
	TypeM    = "M"
	TypeL    = "L"
)
