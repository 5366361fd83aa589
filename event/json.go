package event

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
)

// This file renders items and events as JSON; DynamoDB JSON itself is
// read and written by internal/ddbjson, which the functions here call.
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
	return ddbjson.AppendItem(nil, item)
}

// AppendItem appends the DynamoDB JSON of item to dst and returns the
// extended buffer.
func AppendItem(dst []byte, item Item) []byte {
	return ddbjson.AppendItem(dst, item)
}

// MarshalAttributeValue renders one attribute value as DynamoDB JSON, e.g.
// {"N":"42"}.
func MarshalAttributeValue(av types.AttributeValue) []byte {
	return ddbjson.AppendAV(nil, av)
}

// PlainJSON renders item as ordinary JSON: N as a JSON number literal with
// DynamoDB's exact digits, B as a base64 string, sets as arrays, NULL as
// null. A nil item renders as null.
func PlainJSON(item Item) []byte {
	return ddbjson.AppendPlain(nil, item)
}

// AppendPlainJSON appends the plain JSON of item to dst.
func AppendPlainJSON(dst []byte, item Item) []byte {
	return ddbjson.AppendPlain(dst, item)
}

// IsJSONNumber reports whether s matches JSON's number grammar (RFC 8259:
// no leading zeros, no '+', digits after '.' and after the exponent).
func IsJSONNumber(s string) bool {
	return ddbjson.IsJSONNumber(s)
}

// ValidNumber reports whether s is a decimal number as DynamoDB accepts it
// in an N value: an optional sign, digits with an optional decimal point, an
// optional exponent. It checks the spelling only, not DynamoDB's range and
// precision limits.
func ValidNumber(s string) bool {
	return ddbjson.ValidNumber(s)
}

// UnmarshalItem parses DynamoDB JSON (as [MarshalItem] writes it) back into
// an item. Every attribute value must be an object with exactly one of the
// type keys S, N, B, SS, NS, BS, M, L, NULL, BOOL; numbers must be decimal
// numbers, binary must be standard base64. Errors name the attribute path.
func UnmarshalItem(data []byte) (Item, error) {
	return ddbjson.UnmarshalItem(data)
}

// UnmarshalAttributeValue parses one DynamoDB JSON attribute value such as
// {"N":"42"}.
func UnmarshalAttributeValue(data []byte) (types.AttributeValue, error) {
	return ddbjson.UnmarshalAV(data)
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
	dst = ddbjson.AppendMap(dst, e.Image())
	dst = append(dst, `,"Keys":`...)
	return ddbjson.AppendMap(dst, e.Keys)
}

// appendLineRest appends the rest of e's line after appendLineHead's
// part: OldImage, Metadata, DeadLetter and the newline.
func appendLineRest(dst []byte, e *Event) []byte {
	if e.EventName == "MODIFY" && e.OldImage != nil && e.NewImage != nil {
		dst = append(dst, `,"OldImage":`...)
		dst = AppendItem(dst, e.OldImage)
	}
	dst = append(dst, `,"Metadata":{"kind":`...)
	dst = ddbjson.AppendString(dst, string(e.Kind))
	dst = append(dst, `,"table":`...)
	dst = ddbjson.AppendString(dst, e.Table)
	dst = append(dst, `,"eventID":`...)
	dst = ddbjson.AppendString(dst, e.EventID)
	dst = append(dst, `,"eventName":`...)
	dst = ddbjson.AppendString(dst, e.EventName)
	dst = append(dst, `,"sequenceNumber":`...)
	dst = ddbjson.AppendString(dst, e.SequenceNumber)
	dst = append(dst, `,"shardId":`...)
	dst = ddbjson.AppendString(dst, e.ShardID)
	dst = append(dst, `,"streamArn":`...)
	dst = ddbjson.AppendString(dst, e.StreamARN)
	if e.Region != "" {
		dst = append(dst, `,"region":`...)
		dst = ddbjson.AppendString(dst, e.Region)
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
		dst = ddbjson.AppendString(dst, e.TTLAttribute)
	}
	if e.TTLValue != "" {
		dst = append(dst, `,"ttlValue":`...)
		dst = ddbjson.AppendString(dst, e.TTLValue)
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
		dst = ddbjson.AppendString(dst, e.DeletedBy)
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
	dst = ddbjson.AppendString(dst, d.Error)
	if !d.FirstFailure.IsZero() {
		dst = append(dst, `,"firstFailure":`...)
		dst = appendTime(dst, d.FirstFailure)
	}
	dst = append(dst, `,"reason":`...)
	dst = ddbjson.AppendString(dst, d.Reason)
	if d.Record != nil {
		dst = append(dst, `,"record":`...)
		if json.Valid(d.Record) {
			dst = append(dst, d.Record...)
		} else {
			dst = ddbjson.AppendString(dst, string(d.Record))
		}
	}
	dst = append(dst, `,"sink":`...)
	dst = ddbjson.AppendString(dst, d.Sink)
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
	l, e, err := decodeLineMeta(line)
	if err != nil {
		return Event{}, err
	}
	if err := decodeLineImages(&e, l); err != nil {
		return Event{}, err
	}
	return e, nil
}

// LineText is an archive line's images as the DynamoDB JSON text the line
// holds, nil where the line has none.
type LineText struct {
	Item, Keys, OldImage []byte
	// KeysOnly: the line says the stream carried no image (Metadata.image
	// keys-only), so Item holds the keys.
	KeysOnly bool
}

// DecodeLineText is [DecodeLine] for a reader that keeps the images as
// text (parquetline stores them so): the event has the line's metadata,
// dead letter and Keys (from Item when the stream carried keys only), but
// no NewImage or OldImage; text holds the line's Item, Keys and OldImage
// exactly as written, which are checked to be JSON, not DynamoDB JSON.
// Decoding the images is most of DecodeLine's work.
func DecodeLineText(line []byte) (Event, LineText, error) {
	l, e, err := decodeLineMeta(line)
	if err != nil {
		return Event{}, LineText{}, err
	}
	keys := l.Keys
	if isNull(keys) && l.Metadata.Image == ImageKeysOnly {
		keys = l.Item
	}
	if !isNull(keys) {
		if e.Keys, err = UnmarshalItem(keys); err != nil {
			return Event{}, LineText{}, fmt.Errorf("archive line: Keys: %w", err)
		}
	}
	text := LineText{Item: l.Item, KeysOnly: l.Metadata.Image == ImageKeysOnly}
	if !isNull(l.Keys) {
		text.Keys = l.Keys
	}
	if !isNull(l.OldImage) {
		text.OldImage = l.OldImage
	}
	return e, text, nil
}

// decodeLineMeta parses one archive line and returns it with the event
// its Metadata and DeadLetter describe, images not decoded.
func decodeLineMeta(line []byte) (*lineJSON, Event, error) {
	var l lineJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&l); err != nil {
		return nil, Event{}, fmt.Errorf("archive line: %w", err)
	}
	if dec.More() {
		return nil, Event{}, errors.New("archive line: more than one JSON value")
	}
	if l.Metadata == nil {
		return nil, Event{}, errors.New("archive line: Metadata: missing")
	}
	if isNull(l.Item) {
		return nil, Event{}, errors.New("archive line: Item: missing")
	}
	e, err := lineEvent(l.Metadata, l.DeadLetter)
	if err != nil {
		return nil, Event{}, err
	}
	return &l, e, nil
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
