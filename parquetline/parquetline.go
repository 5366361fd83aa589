// Package parquetline is the Parquet form of the archive: one Parquet file
// holds the events an NDJSON object would hold as lines, one row per
// event, with the line's fields as typed columns.
//
// The item is kept exactly: the item, its keys and a MODIFY's old image
// are columns of DynamoDB JSON text, as the line holds them, so sets,
// binary values and 38-digit numbers survive. The keys are also a column
// of their own ("key": each key attribute's value as text), so a query can
// select an item without parsing JSON. Times are timestamps (UTC,
// microseconds: what Athena, Spark and DuckDB all read; a stream's times
// are whole milliseconds at most, and the TTL time is read back from the
// exact ttl_value), the TTL lag a DECIMAL(18,9) of seconds, and columns
// that a line leaves out are null.
//
// [Writer] writes one file; [Lines] reads one back as the archive lines an
// NDJSON object of the same events would hold, so a reader of lines
// (archive, restore, replay, verify) reads either form. The package
// imports only [event] and the Parquet library; it sits below both the
// sinks that write archives and the reader of archives.
package parquetline

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/parquet-go/parquet-go"

	"github.com/ttl-archiver/archiver/event"
)

// Ext is the name ending of an archive object in this form.
const Ext = ".parquet"

// magic starts and ends every Parquet file.
const magic = "PAR1"

// IsParquet reports whether body looks like a Parquet file (its magic
// number at both ends).
func IsParquet(body []byte) bool {
	return len(body) >= 2*len(magic) && string(body[:len(magic)]) == magic &&
		string(body[len(body)-len(magic):]) == magic
}

// Row is one event as a row of the file. Its Parquet tags are the schema
// (docs/MESSAGES.md, "Parquet archives", and deploy/athena's table).
type Row struct {
	// Item is the fullest image of the item (event.Event.Image) as
	// DynamoDB JSON, exactly as the NDJSON line's "Item".
	Item string `parquet:"item"`
	// Keys is the item's key attributes as DynamoDB JSON.
	Keys string `parquet:"keys"`
	// Key is each key attribute's value as text: a string as it is, a
	// number's decimal digits, binary as base64.
	Key map[string]string `parquet:"key"`
	// OldImage is a MODIFY's image before the change, as DynamoDB JSON.
	OldImage *string `parquet:"old_image,optional"`

	Kind           string     `parquet:"kind,dict"`
	Table          string     `parquet:"table,dict"`
	Region         *string    `parquet:"region,optional,dict"`
	EventID        string     `parquet:"event_id"`
	EventName      *string    `parquet:"event_name,optional,dict"`
	SequenceNumber string     `parquet:"sequence_number"`
	ShardID        string     `parquet:"shard_id,dict"`
	StreamARN      string     `parquet:"stream_arn,dict"`
	CreationTime   *time.Time `parquet:"approximate_creation_time,optional,timestamp(microsecond)"`
	DeletionTime   *time.Time `parquet:"deletion_time,optional,timestamp(microsecond)"`
	SizeBytes      *int64     `parquet:"size_bytes,optional"`
	TTLAttribute   *string    `parquet:"ttl_attribute,optional,dict"`
	TTLValue       *string    `parquet:"ttl_value,optional"`
	TTLTime        *time.Time `parquet:"ttl_time,optional,timestamp(microsecond)"`
	// TTLLagNanos is the TTL lag in nanoseconds: a DECIMAL(18,9) of
	// seconds to a reader.
	TTLLagNanos *int64  `parquet:"ttl_lag_seconds,optional,decimal(9:18)"`
	DeletedBy   *string `parquet:"deleted_by,optional,dict"`
	Image       *string `parquet:"image,optional,dict"`

	DeadLetterReason       *string    `parquet:"dead_letter_reason,optional,dict"`
	DeadLetterSink         *string    `parquet:"dead_letter_sink,optional,dict"`
	DeadLetterError        *string    `parquet:"dead_letter_error,optional"`
	DeadLetterAttempts     *int64     `parquet:"dead_letter_attempts,optional"`
	DeadLetterFirstFailure *time.Time `parquet:"dead_letter_first_failure,optional,timestamp(microsecond)"`
	DeadLetterRecord       *string    `parquet:"dead_letter_record,optional"`
}

// NewRow returns e as a row: the same fields, with the same rules for
// what is left out, as e's NDJSON line (event.AppendLine).
func NewRow(e *event.Event) Row {
	var old string
	if e.EventName == "MODIFY" && e.OldImage != nil && e.NewImage != nil {
		old = string(event.MarshalItem(e.OldImage))
	}
	return newRow(e, string(event.MarshalItem(orEmpty(e.Image()))), string(event.MarshalItem(orEmpty(e.Keys))), old, e.KeysOnly())
}

// lineRow returns the row of an archive line that event.DecodeLineText
// read as e and t: the images' text is the line's own, not decoded and
// written again. It is NewRow's row for the event the line decodes to.
func lineRow(e *event.Event, t event.LineText) Row {
	keys := t.Keys
	if keys == nil {
		keys = []byte("{}")
		if t.KeysOnly {
			keys = t.Item
		}
	}
	keysOnly := t.KeysOnly && e.Kind.Valid() && t.OldImage == nil
	item := t.Item
	if t.OldImage != nil && (t.KeysOnly || e.EventName == "REMOVE" || e.Kind == event.Expired || e.Kind == event.Deleted) {
		item = t.OldImage // the image DecodeLine's event would give (event.Event.Image)
	}
	var old string
	if e.EventName == "MODIFY" && !keysOnly && t.OldImage != nil {
		old = string(t.OldImage)
	}
	return newRow(e, string(item), string(keys), old, keysOnly)
}

// newRow is the row of e, whose images and keys are given as DynamoDB JSON
// text: item (its fullest image), keys, and old (a MODIFY's image before
// the change, "" for none).
func newRow(e *event.Event, item, keys, old string, keysOnly bool) Row {
	r := Row{
		Item:           item,
		Keys:           keys,
		Key:            keyText(e.Keys),
		Kind:           string(e.Kind),
		Table:          e.Table,
		Region:         optString(e.Region),
		EventID:        e.EventID,
		EventName:      optString(e.EventName),
		SequenceNumber: e.SequenceNumber,
		ShardID:        e.ShardID,
		StreamARN:      e.StreamARN,
		CreationTime:   optTime(e.ApproximateCreationTime),
		TTLAttribute:   optString(e.TTLAttribute),
		TTLValue:       optString(e.TTLValue),
		TTLTime:        optTime(e.TTLTime),
		DeletedBy:      optString(e.DeletedBy),
	}
	r.OldImage = optString(old)
	if r.CreationTime != nil && isRemove(e) {
		r.DeletionTime = r.CreationTime
	}
	if e.SizeBytes != 0 {
		r.SizeBytes = &e.SizeBytes
	}
	if e.TTLLag != 0 || (!e.TTLTime.IsZero() && !e.ApproximateCreationTime.IsZero()) {
		lag := int64(e.TTLLag)
		r.TTLLagNanos = &lag
	}
	if keysOnly {
		r.Image = optString(event.ImageKeysOnly)
	}
	if d := e.DeadLetter; d != nil {
		r.setDeadLetter(d)
	}
	return r
}

func (r *Row) setDeadLetter(d *event.DeadLetter) {
	attempts := int64(d.Attempts)
	r.DeadLetterReason = &d.Reason
	r.DeadLetterSink = &d.Sink
	r.DeadLetterError = &d.Error
	r.DeadLetterAttempts = &attempts
	r.DeadLetterFirstFailure = optTime(d.FirstFailure)
	if d.Record != nil {
		r.DeadLetterRecord = optString(string(d.Record))
	}
}

// isRemove mirrors the line's rule for writing deletionTime.
func isRemove(e *event.Event) bool {
	return e.EventName == "REMOVE" || (e.EventName == "" && (e.Kind == event.Expired || e.Kind == event.Deleted))
}

func orEmpty(m event.Item) event.Item {
	if m == nil {
		return event.Item{}
	}
	return m
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// keyText returns each key attribute's value as text; nil for no keys.
func keyText(keys event.Item) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for name, av := range keys {
		switch v := av.(type) {
		case *types.AttributeValueMemberS:
			out[name] = v.Value
		case *types.AttributeValueMemberN:
			out[name] = v.Value
		case *types.AttributeValueMemberB:
			out[name] = base64.StdEncoding.EncodeToString(v.Value)
		default: // not a key type; the keys column has it exactly
			out[name] = string(event.MarshalAttributeValue(av))
		}
	}
	return out
}

// Writer writes events to one Parquet file, compressed with zstd. Rows
// are buffered into row groups; nothing is complete until Close.
type Writer struct {
	w    *parquet.GenericWriter[Row]
	rows []Row
}

// rowBuffer is how many rows Write gathers before handing them to the
// Parquet writer.
const rowBuffer = 256

// Encoder writes Parquet files of events; it keeps its compressors from
// one file to the next, so a program writing many files (a sink) keeps one
// Encoder. It is safe for concurrent use.
type Encoder struct {
	codec *codec
	opts  []parquet.WriterOption // every file's, built once
}

// NewEncoder returns an Encoder.
func NewEncoder() *Encoder {
	c := newCodec()
	opts := []parquet.WriterOption{parquet.Compression(c), parquet.CreatedBy("ttl-archiver", "", "")}
	for _, col := range blobColumns {
		opts = append(opts, parquet.SkipPageStatistics(col), parquet.SkipPageBounds(col))
	}
	return &Encoder{codec: c, opts: opts}
}

// NewWriter returns a Writer of one file to w.
func (enc *Encoder) NewWriter(w io.Writer) *Writer {
	return &Writer{w: parquet.NewGenericWriter[Row](w, enc.opts...)}
}

// blobColumns hold whole documents (DynamoDB JSON, a raw stream record,
// an error's text): their minimum and maximum, which Parquet writes by
// default in each page's header, the column index and the footer, are two
// whole values each time, prune no query (they are read with
// json_extract), and tripled a file of large items. They are left out.
var blobColumns = []string{"item", "keys", "old_image", "dead_letter_error", "dead_letter_record"}

// NewWriter returns a Writer of one file to w, with an Encoder of its own.
func NewWriter(w io.Writer) *Writer { return NewEncoder().NewWriter(w) }

// Write adds one event to the file.
func (w *Writer) Write(e *event.Event) error { return w.add(NewRow(e)) }

// add adds one row to the file.
func (w *Writer) add(r Row) error {
	w.rows = append(w.rows, r)
	if len(w.rows) >= rowBuffer {
		return w.flushRows()
	}
	return nil
}

func (w *Writer) flushRows() error {
	if len(w.rows) == 0 {
		return nil
	}
	if _, err := w.w.Write(w.rows); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	clear(w.rows)
	w.rows = w.rows[:0]
	return nil
}

// Close writes the rows still buffered and the file's footer. The file
// is complete only when Close returns nil.
func (w *Writer) Close() error {
	if err := w.flushRows(); err != nil {
		return err
	}
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

// Encode returns events as one Parquet file.
func Encode(events []event.Event) ([]byte, error) { return NewEncoder().Encode(events) }

// Encode returns events as one Parquet file.
func (enc *Encoder) Encode(events []event.Event) ([]byte, error) {
	var buf bytes.Buffer
	w := enc.NewWriter(&buf)
	for i := range events {
		if err := w.Write(&events[i]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readBatch is how many rows Lines reads from the file at a time.
const readBatch = 128

// Lines reads the Parquet file body and calls fn with each row as the
// NDJSON archive line (without its newline) that the same event has in
// an NDJSON object; fn must not keep the slice. A file that is not a
// Parquet file of this schema is an error naming what is wrong; rows
// come in file order, and n counts them from 1 for fn's error messages.
func Lines(body []byte, fn func(n int, line []byte) error) (err error) {
	if !IsParquet(body) {
		return errors.New("parquet: not a Parquet file (no PAR1 at both ends)")
	}
	// The Parquet library trusts the offsets and lengths a file declares
	// and panics on some that lie; an archive object is hostile input, so
	// a panic while decoding is this file's error, never the process's.
	var inFn bool
	defer func() {
		if r := recover(); r != nil {
			if inFn {
				panic(r)
			}
			err = fmt.Errorf("parquet: malformed file: %v", r)
		}
	}()
	return lines(body, func(n int, line []byte) error {
		inFn = true
		defer func() { inFn = false }()
		return fn(n, line)
	})
}

func lines(body []byte, fn func(n int, line []byte) error) error {
	f, err := parquet.OpenFile(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	if err := checkSchema(f.Schema()); err != nil {
		return err
	}
	r := parquet.NewGenericReader[Row](f)
	defer r.Close()
	rows := make([]Row, readBatch)
	var line []byte
	for n := 0; ; {
		k, err := r.Read(rows)
		for i := range rows[:k] {
			n++
			line = AppendLine(line[:0], &rows[i])
			if ferr := fn(n, line); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parquet: row %d: %w", n+1, err)
		}
	}
}

// checkSchema refuses a file without the columns an archive line needs.
func checkSchema(s *parquet.Schema) error {
	for _, col := range []string{"item", "keys", "kind", "table", "event_id", "sequence_number", "shard_id", "stream_arn"} {
		if _, ok := s.Lookup(col); !ok {
			return fmt.Errorf("parquet: column %q: missing (not an archive file of ttl-archiver)", col)
		}
	}
	return nil
}

// lineMeta is a line's Metadata in the order event.AppendLine writes it.
type lineMeta struct {
	Kind           string          `json:"kind"`
	Table          string          `json:"table"`
	EventID        string          `json:"eventID"`
	EventName      string          `json:"eventName"`
	SequenceNumber string          `json:"sequenceNumber"`
	ShardID        string          `json:"shardId"`
	StreamARN      string          `json:"streamArn"`
	Region         *string         `json:"region,omitempty"`
	CreationTime   string          `json:"approximateCreationDateTime,omitempty"`
	DeletionTime   string          `json:"deletionTime,omitempty"`
	SizeBytes      *int64          `json:"sizeBytes,omitempty"`
	TTLAttribute   *string         `json:"ttlAttribute,omitempty"`
	TTLValue       *string         `json:"ttlValue,omitempty"`
	TTLTime        string          `json:"ttlTime,omitempty"`
	TTLLagSeconds  json.RawMessage `json:"ttlLagSeconds,omitempty"`
	DeletedBy      *string         `json:"deletedBy,omitempty"`
	Image          *string         `json:"image,omitempty"`
}

type lineDeadLetter struct {
	Attempts     int64           `json:"attempts"`
	Error        string          `json:"error"`
	FirstFailure string          `json:"firstFailure,omitempty"`
	Reason       string          `json:"reason"`
	Record       json.RawMessage `json:"record,omitempty"`
	Sink         string          `json:"sink"`
}

// AppendLine appends r as an NDJSON archive line (no newline): the item,
// keys and old image as the text the row holds, the rest from its typed
// columns, so event.DecodeLine reads it as it reads the line the writer
// of the row would have written.
func AppendLine(dst []byte, r *Row) []byte {
	dst = append(dst, `{"Item":`...)
	dst = appendRaw(dst, r.Item)
	dst = append(dst, `,"Keys":`...)
	dst = appendRaw(dst, r.Keys)
	if r.OldImage != nil {
		dst = append(dst, `,"OldImage":`...)
		dst = appendRaw(dst, *r.OldImage)
	}
	dst = append(dst, `,"Metadata":`...)
	dst = appendJSON(dst, r.meta())
	if r.DeadLetterReason != nil {
		dst = append(dst, `,"DeadLetter":`...)
		dst = appendJSON(dst, r.deadLetter())
	}
	return append(dst, '}')
}

func (r *Row) meta() *lineMeta {
	ttlTime := timeText(r.TTLTime)
	if r.TTLValue != nil && r.TTLTime != nil {
		if t, ok := event.ParseEpochSeconds(*r.TTLValue); ok {
			ttlTime = timeText(&t) // exact, where the column holds microseconds
		}
	}
	m := &lineMeta{
		Kind: r.Kind, Table: r.Table, EventID: r.EventID, EventName: deref(r.EventName),
		SequenceNumber: r.SequenceNumber, ShardID: r.ShardID, StreamARN: r.StreamARN,
		Region: r.Region, CreationTime: timeText(r.CreationTime), DeletionTime: timeText(r.DeletionTime),
		SizeBytes: r.SizeBytes, TTLAttribute: r.TTLAttribute, TTLValue: r.TTLValue,
		TTLTime: ttlTime, DeletedBy: r.DeletedBy, Image: r.Image,
	}
	if r.TTLLagNanos != nil {
		m.TTLLagSeconds = secondsText(*r.TTLLagNanos)
	}
	return m
}

func (r *Row) deadLetter() *lineDeadLetter {
	d := &lineDeadLetter{
		Reason: deref(r.DeadLetterReason), Sink: deref(r.DeadLetterSink), Error: deref(r.DeadLetterError),
		FirstFailure: timeText(r.DeadLetterFirstFailure),
	}
	if r.DeadLetterAttempts != nil {
		d.Attempts = *r.DeadLetterAttempts
	}
	if r.DeadLetterRecord != nil {
		if json.Valid([]byte(*r.DeadLetterRecord)) {
			d.Record = json.RawMessage(*r.DeadLetterRecord)
		} else {
			d.Record, _ = json.Marshal(*r.DeadLetterRecord)
		}
	}
	return d
}

// appendRaw appends s, which should be a JSON object; anything else
// becomes a string, which event.DecodeLine refuses naming the field.
func appendRaw(dst []byte, s string) []byte {
	if s == "" || !json.Valid([]byte(s)) {
		return append(dst, `"not JSON"`...)
	}
	return append(dst, s...)
}

// appendJSON appends v as JSON without HTML escaping.
func appendJSON(dst []byte, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the structs above always encode
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func timeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// secondsText writes ns nanoseconds as exact decimal seconds.
func secondsText(ns int64) json.RawMessage {
	sign := ""
	u := uint64(ns)
	if ns < 0 {
		sign, u = "-", uint64(-ns)
	}
	s := fmt.Sprintf("%s%d.%09d", sign, u/1e9, u%1e9)
	s = trimFraction(s)
	return json.RawMessage(s)
}

func trimFraction(s string) string {
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// FromLines writes the NDJSON archive lines of lines (as event.AppendLine
// writes them, each ending in a newline) to w as one Parquet file: the
// rows Encode writes for the events the lines decode to. A line that is
// not an archive line is an error naming its number.
func FromLines(w io.Writer, lines []byte) error { return NewEncoder().FromLines(w, lines) }

// FromLines is the package's FromLines with enc's compressors.
func (enc *Encoder) FromLines(w io.Writer, lines []byte) error {
	pw := enc.NewWriter(w)
	var dec event.LineDecoder
	for n := 1; len(lines) > 0; n++ {
		line := lines
		if i := bytes.IndexByte(lines, '\n'); i >= 0 {
			line, lines = lines[:i], lines[i+1:]
		} else {
			lines = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, text, err := dec.DecodeText(line) // text refers to lines, which lineRow copies
		if err != nil {
			return fmt.Errorf("parquet: line %d: %w", n, err)
		}
		if err := pw.add(lineRow(&e, text)); err != nil {
			return err
		}
	}
	return pw.Close()
}
