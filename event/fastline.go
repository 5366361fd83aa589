package event

import (
	"strconv"
	"time"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
)

// LineDecoder decodes the lines of one archive object, one after
// another, in one pass each where it can (DecodeFast, DecodeText), which
// encoding/json's DecodeLine and DecodeLineText cost several times over.
// It keeps one string for the attribute names and metadata values an
// object's lines repeat, and an IDHasher for their identities. The zero
// LineDecoder is ready to use; it is not safe for concurrent use.
type LineDecoder struct {
	in interner
}

// DecodeFast decodes a line written exactly as AppendLine writes it into
// *e, which must be zero, or declines (ok false) and may leave *e half
// filled; the caller then runs DecodeLine, which decodes or explains.
// Whatever it accepts, it decodes to DecodeLine's event, field for field
// (FuzzFastDecodeLine); it declines everything else: whitespace, members
// out of AppendLine's order or unknown, escapes other than those
// AppendLine writes in string values (none in names or metadata), invalid
// UTF-8, a DeadLetter, any value DecodeLine would refuse. Every string in
// *e is its own copy: none refers to line.
//
// It accepts only what AppendLine writes, byte for byte: attribute names
// in strictly ascending order (so no name twice), strings without U+2028
// or U+2029 (AppendLine escapes them), base64 in its one canonical form.
// So the line's Item and Keys are the canonical JSON an expiry's message
// ID is hashed from (IDHasher): for an expiry that carries its old image,
// head is the length of the line's {"Item":...,"Keys":... (0 otherwise),
// and the caller may hash those bytes as they are (IDHasher.ExpiryDigest).
//
// With skipImages, the images are checked as thoroughly but not built:
// the event has no Keys, OldImage or NewImage.
func (d *LineDecoder) DecodeFast(e *Event, line []byte, skipImages bool) (head int, ok bool) {
	return fastDecodeLine(e, line, d.interner(), skipImages, nil)
}

// DecodeText is DecodeLineText, in one pass when DecodeFast would take
// the line; text's slices then refer to line's bytes, which the caller
// must not change while it uses them.
func (d *LineDecoder) DecodeText(line []byte) (Event, LineText, error) {
	var e Event
	var text LineText
	if _, ok := fastDecodeLine(&e, line, d.interner(), true, &text); ok {
		return e, text, nil
	}
	return DecodeLineText(line)
}

// IDHasher is the decoder's IDHasher, for its lines' identities.
func (d *LineDecoder) IDHasher() *IDHasher { return d.interner().hasher() }

// interner is d's, nil for a nil d (every string copied).
func (d *LineDecoder) interner() *interner {
	if d == nil {
		return nil
	}
	return &d.in
}

// fastDecodeLine is DecodeFast with names (nil: every string copied) and,
// when text is not nil, DecodeText's fast path: the images are checked but
// only Keys is built, and text gets the images' bytes.
func fastDecodeLine(e *Event, b []byte, names *interner, skipImages bool, text *LineText) (head int, ok bool) {
	p := &lineParser{Canonical: ddbjson.Canonical{Scanner: ddbjson.NewScanner(b), Names: names.strs(), Skip: skipImages}, names: names}
	if !p.Lit(`{"Item":`) {
		return 0, false
	}
	itemAt := p.Pos()
	item, ok := p.Item()
	itemEnd := p.Pos()
	if !ok || !p.Lit(`,"Keys":`) {
		return 0, false
	}
	keysAt := p.Pos()
	p.Skip = skipImages && text == nil // DecodeText builds the keys (parquetline's key column)
	e.Keys, ok = p.Item()
	p.Skip = skipImages
	if !ok {
		return 0, false
	}
	head = p.Pos()
	var old Item
	oldAt := -1
	if p.Lit(`,"OldImage":`) {
		oldAt = p.Pos()
		if old, ok = p.Item(); !ok {
			return 0, false
		}
	}
	hasOld := oldAt >= 0
	if text != nil {
		*text = LineText{Item: b[itemAt:itemEnd], Keys: b[keysAt:head]}
		if hasOld {
			text.OldImage = b[oldAt:p.Pos()]
		}
	}
	if !p.Lit(`,"Metadata":`) || !p.metadata(e) || !p.Char('}') || len(p.Rest()) != 0 {
		return 0, false
	}
	remove := e.EventName == "REMOVE" || (e.EventName == "" && (e.Kind == Expired || e.Kind == Deleted))
	switch {
	case e.Kind == Expired && (hasOld || (!p.keysOnly && !remove)):
		return 0, false // an expiry in a shape AppendLine never writes: which image is its old one is DecodeLine's to say
	case e.Kind != Expired || p.keysOnly:
		head = 0 // no expiry ID: no old image (a dead letter is declined)
	}
	if text != nil {
		text.KeysOnly = p.keysOnly
		return head, true
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

// lineParser is a cursor over one line: its images are read by
// ddbjson's canonical reader, its Metadata here.
type lineParser struct {
	ddbjson.Canonical
	names *interner // nil: none
	// keysOnly: Metadata said "image":"keys-only".
	keysOnly bool
}

// interner hands out one string for repeated attribute names and
// metadata values (table, shard, stream ARN, ...), which every line of an
// object repeats, so that they are allocated once per object rather than
// once per line. Its map is ddbjson's Interner (which stops growing at
// 4096 strings and holds the scratch buffer that checks base64 without
// building), shared by the line's attribute names and metadata values.
// last holds, per metadata member (see slot), the value of the line
// before, which the next line most likely repeats: checked first, it
// spares a map lookup.
type interner struct {
	ddbjson.Interner
	scratch []byte // strings' buffer
	last    [slots]string
	ids     *IDHasher
}

// strs is the interner of the line's attribute names (nil when in is).
func (in *interner) strs() *ddbjson.Interner {
	if in == nil {
		return nil
	}
	return &in.Interner
}

// hasher is the object's IDHasher, for its lines' identities (a new one
// when in is nil).
func (in *interner) hasher() *IDHasher {
	if in == nil {
		return NewIDHasher()
	}
	if in.ids == nil {
		in.ids = NewIDHasher()
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

// field interns the values of one metadata member, the line before's
// tried first.
func (in *interner) field(s slot, b []byte) string {
	if in == nil {
		return string(b)
	}
	if last := in.last[s]; last == string(b) {
		return last
	}
	v := in.Intern(b)
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

// metadata reads the Metadata object in AppendLine's member order and
// checks what DecodeLine checks.
func (p *lineParser) metadata(e *Event) bool {
	var kind string
	var id, seq, ttlValue []byte
	ok := p.Lit(`{"kind":`) && p.fieldTo(slotKind, &kind) &&
		p.Lit(`,"table":`) && p.fieldTo(slotTable, &e.Table) &&
		p.Lit(`,"eventID":`) && p.rawTo(&id) &&
		p.Lit(`,"eventName":`) && p.fieldTo(slotEventName, &e.EventName) &&
		p.Lit(`,"sequenceNumber":`) && p.rawTo(&seq) &&
		p.Lit(`,"shardId":`) && p.fieldTo(slotShard, &e.ShardID) &&
		p.Lit(`,"streamArn":`) && p.fieldTo(slotARN, &e.StreamARN)
	if !ok {
		return false
	}
	e.Kind = Kind(kind)
	if p.Lit(`,"region":`) {
		if !p.fieldTo(slotRegion, &e.Region) || !ValidRegion(e.Region) {
			return false
		}
	} else {
		e.Region = RegionOf(e.StreamARN) // a line written before lines named it
	}
	if p.Lit(`,"approximateCreationDateTime":`) && !p.timeTo(&e.ApproximateCreationTime) {
		return false
	}
	if p.Lit(`,"deletionTime":`) {
		if _, ok := p.Plain(); !ok {
			return false
		}
	}
	if p.Lit(`,"sizeBytes":`) && !p.intTo(&e.SizeBytes) {
		return false
	}
	if p.Lit(`,"ttlAttribute":`) && !p.fieldTo(slotTTLAttribute, &e.TTLAttribute) {
		return false
	}
	if p.Lit(`,"ttlValue":`) && (!p.rawTo(&ttlValue) || (len(ttlValue) > 0 && !ddbjson.ValidNumber(string(ttlValue)))) {
		return false
	}
	if p.Lit(`,"ttlTime":`) && !p.timeTo(&e.TTLTime) {
		return false
	}
	if p.Lit(`,"ttlLagSeconds":`) && !p.secondsTo(&e.TTLLag) {
		return false
	}
	if p.Lit(`,"deletedBy":`) && !p.fieldTo(slotDeletedBy, &e.DeletedBy) {
		return false
	}
	p.keysOnly = p.Lit(`,"image":"` + ImageKeysOnly + `"`)
	if !p.Char('}') {
		return false
	}
	e.EventID, e.SequenceNumber, e.TTLValue = p.names.strings(id, seq, ttlValue)
	return checkMeta(e)
}

// checkMeta declines what DecodeLine refuses in Metadata.
func checkMeta(e *Event) bool {
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
	remove := e.EventName == "REMOVE" || (e.EventName == "" && (e.Kind == Expired || e.Kind == Deleted))
	switch e.DeletedBy {
	case "":
		return true
	case DeletedByTTL, DeletedByOther:
		return remove
	}
	return false
}

// fieldTo reads the value of metadata member s. The previous line's
// value is tried first, by its bytes: as Plain returned it, it holds no
// quote, backslash or control byte, so the same bytes between quotes are
// the same string.
func (p *lineParser) fieldTo(s slot, dst *string) bool {
	if p.names != nil {
		last, rest := p.names.last[s], p.Rest()
		if end := 1 + len(last); end < len(rest) && rest[0] == '"' && rest[end] == '"' && string(rest[1:end]) == last {
			*dst = last
			p.Advance(end + 1)
			return true
		}
	}
	b, ok := p.Plain()
	if ok {
		*dst = p.names.field(s, b)
	}
	return ok
}

func (p *lineParser) rawTo(dst *[]byte) bool {
	b, ok := p.Plain()
	*dst = b
	return ok
}

func (p *lineParser) timeTo(dst *time.Time) bool {
	b, ok := p.Plain()
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
	b := p.Rest()
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == d || (b[d] == '0' && i-d > 1) {
		return nil, nil, false
	}
	intPart = b[:i]
	if fraction && i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == f {
			return nil, nil, false
		}
		frac = b[f:i]
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E' || b[i] == '.') {
		return nil, nil, false
	}
	p.Advance(i)
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
