package archive

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// fastDecodeLine decodes an archive line written exactly as
// event.AppendLine writes it, in one pass, or declines (ok false). It may
// only ever return the event event.DecodeLine returns for the same bytes,
// field for field; it declines everything else: whitespace, members out
// of AppendLine's order or unknown, escapes in strings, invalid UTF-8, a
// DeadLetter, any value DecodeLine would refuse. The caller then runs
// event.DecodeLine, which decodes or explains. encoding/json made
// decoding about 98% of a verify's CPU; FuzzFastDecodeLine holds this
// function to DecodeLine.
//
// It accepts only what AppendLine writes, byte for byte: attribute names
// in strictly ascending order (so no name twice), strings without U+2028
// or U+2029 (AppendLine escapes them), base64 in its one canonical form.
// So the line's Item and Keys are the canonical JSON an expiry's message
// ID is hashed from (event.IDHasher): for an expiry that carries its old
// image, head is the length of the line's {"Item":...,"Keys":... (0
// otherwise), and the caller hashes those bytes as they are.
//
// With skipImages, the images are checked as thoroughly but not built:
// the event has no Keys, OldImage or NewImage.
//
// It fills *e, which must be zero, and may leave it half filled when it
// declines. Every string in *e is its own copy: none refers to b.
func fastDecodeLine(e *event.Event, b []byte, names *interner, skipImages bool) (head int, ok bool) {
	p := &lineParser{b: b, names: names, skip: skipImages}
	if !p.lit(`{"Item":`) {
		return 0, false
	}
	item, ok := p.item()
	if !ok || !p.lit(`,"Keys":`) {
		return 0, false
	}
	if e.Keys, ok = p.item(); !ok {
		return 0, false
	}
	head = p.i
	var old event.Item
	hasOld := p.lit(`,"OldImage":`)
	if hasOld {
		if old, ok = p.item(); !ok {
			return 0, false
		}
	}
	if !p.lit(`,"Metadata":`) || !p.metadata(e) || !p.char('}') || p.i != len(p.b) {
		return 0, false
	}
	remove := e.EventName == "REMOVE" || (e.EventName == "" && (e.Kind == event.Expired || e.Kind == event.Deleted))
	switch {
	case e.Kind == event.Expired && (hasOld || (!p.keysOnly && !remove)):
		return 0, false // an expiry in a shape AppendLine never writes: which image is its old one is DecodeLine's to say
	case e.Kind != event.Expired || p.keysOnly:
		head = 0 // no expiry ID: no old image (a dead letter is declined)
	}
	if skipImages {
		return head, true
	}
	switch {
	case p.keysOnly: // the stream carried no image: Item is the keys
		if e.Keys == nil {
			e.Keys = item
		}
	case remove:
		e.OldImage = item
	default:
		e.NewImage = item
	}
	if hasOld {
		e.OldImage = old
	}
	return head, true
}

// lineParser is a cursor over one line.
type lineParser struct {
	b     []byte
	i     int
	names *interner // nil: none
	skip  bool      // check images, do not build them
	// keysOnly: Metadata said "image":"keys-only".
	keysOnly bool
}

// interner hands out one string for repeated attribute names and
// metadata values (table, shard, stream ARN, ...), which every line of an
// object repeats, so that they are allocated once per object rather than
// once per line. It stops growing at maxInterned strings.
// It also holds the scratch buffer that checks base64 without building.
// last holds, per metadata member (see slot), the value of the line
// before, which the next line most likely repeats: checked first, it
// spares a map lookup.
type interner struct {
	m       map[string]string
	scratch []byte
	last    [slots]string
	ids     *event.IDHasher
}

// hasher is the object's IDHasher, for its lines' identities (a new one
// when in is nil).
func (in *interner) hasher() *event.IDHasher {
	if in == nil {
		return event.NewIDHasher()
	}
	if in.ids == nil {
		in.ids = event.NewIDHasher()
	}
	return in.ids
}

// slot names the metadata members whose values repeat.
type slot int

const (
	slotKind slot = iota
	slotTable
	slotEventName
	slotShard
	slotARN
	slotRegion
	slotTTLAttribute
	slotDeletedBy
	slots
)

const maxInterned = 4096

func (in *interner) get(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}

// field is get for the values of one metadata member.
func (in *interner) field(s slot, b []byte) string {
	if in == nil {
		return string(b)
	}
	if last := in.last[s]; last == string(b) {
		return last
	}
	v := in.get(b)
	in.last[s] = v
	return v
}

// strings returns a, b and c as strings, with one allocation.
func (in *interner) strings(a, b, c []byte) (sa, sb, sc string) {
	if in == nil {
		return string(a), string(b), string(c)
	}
	buf := append(append(append(in.scratch[:0], a...), b...), c...)
	in.scratch = buf
	all := string(buf)
	return all[:len(a)], all[len(a) : len(a)+len(b)], all[len(a)+len(b):]
}

// lit consumes s if the input continues with it.
func (p *lineParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str reads a JSON string without escapes, of valid UTF-8.
func (p *lineParser) str() (string, bool) {
	b, ok := p.raw()
	if !ok {
		return "", false
	}
	return string(b), true
}

// name is str for strings that repeat from line to line (interned).
func (p *lineParser) name() (string, bool) {
	b, ok := p.raw()
	if !ok {
		return "", false
	}
	return p.names.get(b), true
}

// raw reads a JSON string without escapes, of valid UTF-8, and returns its
// bytes (part of the line).
func (p *lineParser) raw() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	if n, ok := plainString(p.b[start:]); ok {
		p.i = start + n + 1
		return p.b[start : start+n], true
	}
	ascii := true
	for i := start; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := p.b[start:i]
			if !ascii && (!utf8.Valid(s) || bytes.Contains(s, []byte(lineSep)) || bytes.Contains(s, []byte(paraSep))) {
				return nil, false // AppendLine escapes U+2028 and U+2029
			}
			p.i = i + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// lineSep and paraSep are U+2028 and U+2029, which AppendLine writes
// escaped.
const lineSep, paraSep = "\u2028", "\u2029"

// strictBase64 is the standard encoding that takes only the canonical
// form of a value (padding bits zero), the one AppendLine writes.
var strictBase64 = base64.StdEncoding.Strict()

// plainString finds the closing quote of a JSON string whose content b
// starts with, eight bytes at a time, and returns the content's length;
// ok is false when the content is not plain (a byte below 0x20, above
// 0x7f or a backslash comes first: raw then looks byte by byte) or has no
// end.
//
// Per word, the masks below have the high bit of a byte set where that
// byte matches; the lowest set bit of each is exact (a false match can
// only come after a true one), which is all that is read.
func plainString(b []byte) (n int, ok bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; n+8 <= len(b); n += 8 {
		v := binary.LittleEndian.Uint64(b[n:])
		q := v ^ '"'*ones
		quote := (q - ones) &^ q & highs
		x := v ^ '\\'*ones
		special := (v | (v-0x20*ones)&^v | (x-ones)&^x) & highs
		if quote != 0 {
			at := bits.TrailingZeros64(quote)
			if special != 0 && bits.TrailingZeros64(special) < at {
				return 0, false
			}
			return n + at/8, true
		}
		if special != 0 {
			return 0, false
		}
	}
	for ; n < len(b); n++ {
		switch c := b[n]; {
		case c == '"':
			return n, true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return 0, false
		}
	}
	return 0, false
}

// char consumes c if the input continues with it.
func (p *lineParser) char(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// item reads a DynamoDB JSON object of attribute values (nil when
// skipping images), its names in strictly ascending order, as AppendItem
// writes them.
func (p *lineParser) item() (event.Item, bool) {
	if !p.char('{') {
		return nil, false
	}
	var m event.Item
	if !p.skip {
		m = event.Item{}
	}
	if p.char('}') {
		return m, true
	}
	var prev []byte
	for {
		name, ok := p.raw()
		if !ok || (prev != nil && string(prev) >= string(name)) || !p.char(':') {
			return nil, false
		}
		prev = name
		if p.skip {
			if !p.skipValue() {
				return nil, false
			}
		} else if m[p.names.get(name)], ok = p.value(); !ok {
			return nil, false
		}
		if p.char('}') {
			return m, true
		}
		if !p.char(',') {
			return nil, false
		}
	}
}

// skipValue checks one attribute value as value reads it, building
// nothing.
func (p *lineParser) skipValue() bool {
	tb, ok := p.typeTag()
	if !ok {
		return false
	}
	switch string(tb) {
	case "S":
		_, ok = p.raw()
	case "N":
		var b []byte
		b, ok = p.raw()
		ok = ok && event.ValidNumber(string(b))
	case "B":
		var b []byte
		b, ok = p.raw()
		ok = ok && p.base64OK(b)
	case "BOOL":
		ok = p.lit("true") || p.lit("false")
	case "NULL":
		ok = p.lit("true")
	case "SS", "NS", "BS":
		ok = p.skipArray(func() bool {
			b, ok := p.raw()
			return ok && (tb[0] == 'S' || (tb[0] == 'N' && event.ValidNumber(string(b))) || (tb[0] == 'B' && p.base64OK(b)))
		})
	case "M":
		_, ok = p.item()
	case "L":
		ok = p.skipArray(p.skipValue)
	default:
		return false
	}
	return ok && p.char('}')
}

// typeTag reads the start of an attribute value, {"T":, and returns T.
// A one-letter T (S, N, B, M, L) is matched in place.
func (p *lineParser) typeTag() ([]byte, bool) {
	if i := p.i; i+5 <= len(p.b) && p.b[i] == '{' && p.b[i+1] == '"' && p.b[i+3] == '"' && p.b[i+4] == ':' {
		p.i += 5
		return p.b[i+2 : i+3], true
	}
	if !p.lit(`{"`) {
		return nil, false
	}
	p.i-- // back to the type key's quote
	tb, ok := p.raw()
	return tb, ok && p.char(':')
}

// skipArray checks a JSON array whose elements elem checks.
func (p *lineParser) skipArray(elem func() bool) bool {
	if !p.char('[') {
		return false
	}
	for n := 0; !p.char(']'); n++ {
		if (n > 0 && !p.char(',')) || !elem() {
			return false
		}
	}
	return true
}

// base64OK reports whether b is standard base64, as
// the strict base64.StdEncoding would take it (the one form AppendLine
// writes).
func (p *lineParser) base64OK(b []byte) bool {
	var scratch []byte
	if p.names != nil {
		scratch = p.names.scratch
	}
	n := base64.StdEncoding.DecodedLen(len(b))
	if cap(scratch) < n {
		scratch = make([]byte, n)
		if p.names != nil {
			p.names.scratch = scratch
		}
	}
	_, err := strictBase64.Decode(scratch[:n], b)
	return err == nil
}

// value reads one attribute value, {"T":V}.
func (p *lineParser) value() (types.AttributeValue, bool) {
	tb, ok := p.typeTag()
	if !ok {
		return nil, false
	}
	var av types.AttributeValue
	switch string(tb) { // compared only: no allocation
	case "S":
		s, ok := p.str()
		av = &types.AttributeValueMemberS{Value: s}
		if !ok {
			return nil, false
		}
	case "N":
		s, ok := p.str()
		if !ok || !event.ValidNumber(s) {
			return nil, false
		}
		av = &types.AttributeValueMemberN{Value: s}
	case "B":
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		v, err := strictBase64.DecodeString(s)
		if err != nil {
			return nil, false
		}
		av = &types.AttributeValueMemberB{Value: v}
	case "BOOL":
		switch {
		case p.lit("true"):
			av = &types.AttributeValueMemberBOOL{Value: true}
		case p.lit("false"):
			av = &types.AttributeValueMemberBOOL{Value: false}
		default:
			return nil, false
		}
	case "NULL":
		if !p.lit("true") {
			return nil, false
		}
		av = &types.AttributeValueMemberNULL{Value: true}
	case "SS", "NS", "BS":
		if av, ok = p.set(tb[0]); !ok {
			return nil, false
		}
	case "M":
		m, ok := p.item()
		if !ok {
			return nil, false
		}
		av = &types.AttributeValueMemberM{Value: m}
	case "L":
		if av, ok = p.list(); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	return av, p.char('}')
}

// set reads the array of an SS, NS or BS (typ 'S', 'N' or 'B').
func (p *lineParser) set(typ byte) (types.AttributeValue, bool) {
	if !p.char('[') {
		return nil, false
	}
	ss := []string{}
	for !p.char(']') {
		if len(ss) > 0 && !p.char(',') {
			return nil, false
		}
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		ss = append(ss, s)
	}
	switch typ {
	case 'S':
		return &types.AttributeValueMemberSS{Value: ss}, true
	case 'N':
		for _, n := range ss {
			if !event.ValidNumber(n) {
				return nil, false
			}
		}
		return &types.AttributeValueMemberNS{Value: ss}, true
	}
	bs := make([][]byte, len(ss))
	for i, s := range ss {
		v, err := strictBase64.DecodeString(s)
		if err != nil {
			return nil, false
		}
		bs[i] = v
	}
	return &types.AttributeValueMemberBS{Value: bs}, true
}

// list reads the array of an L.
func (p *lineParser) list() (types.AttributeValue, bool) {
	if !p.char('[') {
		return nil, false
	}
	l := []types.AttributeValue{}
	for !p.char(']') {
		if len(l) > 0 && !p.char(',') {
			return nil, false
		}
		av, ok := p.value()
		if !ok {
			return nil, false
		}
		l = append(l, av)
	}
	return &types.AttributeValueMemberL{Value: l}, true
}

// metadata reads the Metadata object in AppendLine's member order and
// checks what DecodeLine checks.
func (p *lineParser) metadata(e *event.Event) bool {
	var kind string
	var id, seq, ttlValue []byte
	ok := p.lit(`{"kind":`) && p.fieldTo(slotKind, &kind) &&
		p.lit(`,"table":`) && p.fieldTo(slotTable, &e.Table) &&
		p.lit(`,"eventID":`) && p.rawTo(&id) &&
		p.lit(`,"eventName":`) && p.fieldTo(slotEventName, &e.EventName) &&
		p.lit(`,"sequenceNumber":`) && p.rawTo(&seq) &&
		p.lit(`,"shardId":`) && p.fieldTo(slotShard, &e.ShardID) &&
		p.lit(`,"streamArn":`) && p.fieldTo(slotARN, &e.StreamARN)
	if !ok {
		return false
	}
	e.Kind = event.Kind(kind)
	if p.lit(`,"region":`) {
		if !p.fieldTo(slotRegion, &e.Region) || !event.ValidRegion(e.Region) {
			return false
		}
	} else {
		e.Region = event.RegionOf(e.StreamARN) // a line written before lines named it
	}
	if p.lit(`,"approximateCreationDateTime":`) && !p.timeTo(&e.ApproximateCreationTime) {
		return false
	}
	if p.lit(`,"deletionTime":`) {
		if _, ok := p.raw(); !ok {
			return false
		}
	}
	if p.lit(`,"sizeBytes":`) && !p.intTo(&e.SizeBytes) {
		return false
	}
	if p.lit(`,"ttlAttribute":`) && !p.fieldTo(slotTTLAttribute, &e.TTLAttribute) {
		return false
	}
	if p.lit(`,"ttlValue":`) && (!p.rawTo(&ttlValue) || (len(ttlValue) > 0 && !event.ValidNumber(string(ttlValue)))) {
		return false
	}
	if p.lit(`,"ttlTime":`) && !p.timeTo(&e.TTLTime) {
		return false
	}
	if p.lit(`,"ttlLagSeconds":`) && !p.secondsTo(&e.TTLLag) {
		return false
	}
	if p.lit(`,"deletedBy":`) && !p.fieldTo(slotDeletedBy, &e.DeletedBy) {
		return false
	}
	p.keysOnly = p.lit(`,"image":"` + event.ImageKeysOnly + `"`)
	if !p.char('}') {
		return false
	}
	e.EventID, e.SequenceNumber, e.TTLValue = p.names.strings(id, seq, ttlValue)
	return checkMeta(e)
}

// checkMeta declines what DecodeLine refuses in Metadata.
func checkMeta(e *event.Event) bool {
	if !e.Kind.Valid() {
		return false
	}
	switch e.EventName {
	case "INSERT", "MODIFY", "REMOVE", "":
	default:
		return false
	}
	for i := 0; i < len(e.SequenceNumber); i++ {
		if c := e.SequenceNumber[i]; c < '0' || c > '9' {
			return false
		}
	}
	remove := e.EventName == "REMOVE" || (e.EventName == "" && (e.Kind == event.Expired || e.Kind == event.Deleted))
	switch e.DeletedBy {
	case "":
		return true
	case event.DeletedByTTL, event.DeletedByOther:
		return remove
	}
	return false
}

// fieldTo reads the value of metadata member s. The previous line's
// value is tried first, by its bytes: as raw returned it, it holds no
// quote, backslash or control byte, so the same bytes between quotes are
// the same string.
func (p *lineParser) fieldTo(s slot, dst *string) bool {
	if p.names != nil {
		last := p.names.last[s]
		if end := p.i + 1 + len(last); end < len(p.b) && p.b[p.i] == '"' && p.b[end] == '"' && string(p.b[p.i+1:end]) == last {
			*dst, p.i = last, end+1
			return true
		}
	}
	b, ok := p.raw()
	if ok {
		*dst = p.names.field(s, b)
	}
	return ok
}

func (p *lineParser) rawTo(dst *[]byte) bool {
	b, ok := p.raw()
	*dst = b
	return ok
}

func (p *lineParser) timeTo(dst *time.Time) bool {
	b, ok := p.raw()
	if !ok {
		return false
	}
	if t, ok := parseUTC(b); ok {
		*dst = t
		return true
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	*dst = t
	return err == nil
}

// parseUTC reads the timestamps AppendLine writes,
// YYYY-MM-DDTHH:MM:SS[.F{1,9}]Z, to the value time.Parse(RFC3339Nano)
// gives, without its generality; anything else (or out of range) is left
// to time.Parse (ok false).
func parseUTC(b []byte) (time.Time, bool) {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	ns := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		if ns = num(20, len(frac)-1); ns < 0 {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	if y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || d > daysIn(y, mo) {
		return time.Time{}, false
	}
	unix := daysSinceEpoch(y, mo, d)*86400 + int64(h*3600+mi*60+sec)
	return time.Unix(unix, int64(ns)).UTC(), true
}

// daysIn is the number of days of month mo (1-12) of year y.
func daysIn(y, mo int) int {
	switch mo {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch is the days from 1970-01-01 to y-mo-d (0 <= y <= 9999)
// in the proleptic Gregorian calendar: eras of 400 years of 146097 days,
// years counted from March so that February's leap day comes last.
func daysSinceEpoch(y, mo, d int) int64 {
	if mo <= 2 {
		y--
	}
	era := (y+400)/400 - 1 // floor(y / 400) for y >= -1
	yoe := y - era*400
	doy := (153*((mo+9)%12)+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// number returns the JSON number at the cursor: -?(0|[1-9][0-9]*), then
// an optional fraction; exponents are declined.
func (p *lineParser) number(fraction bool) (intPart, frac []byte, ok bool) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	d := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == d || (p.b[d] == '0' && p.i-d > 1) {
		return nil, nil, false
	}
	intPart = p.b[start:p.i]
	if fraction && p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		f := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == f {
			return nil, nil, false
		}
		frac = p.b[f:p.i]
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E' || p.b[p.i] == '.') {
		return nil, nil, false
	}
	return intPart, frac, true
}

func (p *lineParser) intTo(dst *int64) bool {
	s, _, ok := p.number(false)
	if !ok {
		return false
	}
	if len(s) <= 18 { // no overflow: parse in place
		neg := s[0] == '-'
		if neg {
			s = s[1:]
		}
		n := int64(0)
		for _, c := range s {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		*dst = n
		return true
	}
	n, err := strconv.ParseInt(string(s), 10, 64)
	*dst = n
	return err == nil
}

// secondsTo reads decimal seconds with up to nine decimals into a
// Duration, declining anything that does not fit exactly.
func (p *lineParser) secondsTo(dst *time.Duration) bool {
	s, frac, ok := p.number(true)
	if !ok || len(frac) > 9 {
		return false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) > 10 { // more than 9223372035 whatever the digits
		return false
	}
	secs := uint64(0)
	for _, c := range s {
		secs = secs*10 + uint64(c-'0')
	}
	if secs > 9223372035 {
		return false
	}
	ns := uint64(0)
	for i := range 9 {
		ns *= 10
		if i < len(frac) {
			ns += uint64(frac[i] - '0')
		}
	}
	total := secs*1e9 + ns
	if total > 1<<63-1 {
		return false
	}
	*dst = time.Duration(total)
	if neg {
		*dst = -*dst
	}
	return true
}
