package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Limits of the Streams API, as AWS documents them.
const (
	MaxGetRecordsLimit     = 1000    // records per GetRecords
	MaxGetRecordsBytes     = 1 << 20 // bytes of records per GetRecords
	MaxDescribeStreamLimit = 100     // shards per DescribeStream page
	MaxListStreamsLimit    = 100     // streams per ListStreams page
)

// Handle serves one Streams API operation of a request to region ("": the
// registry's Options.Region). op is the operation name without the
// "DynamoDBStreams_20120810." prefix; body is the raw JSON request. It
// returns a JSON-encodable response or an *awserr.Error (never anything
// else, never a panic). A stream of another Region, by ARN or iterator,
// is not found there, as on AWS.
func (r *Registry) Handle(ctx context.Context, region, op string, body []byte) (any, error) {
	if region == "" {
		region = r.opts.Region
	}
	switch op {
	case "ListStreams":
		var in listStreamsIn
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		return r.listStreams(region, in)
	case "DescribeStream":
		var in describeStreamIn
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		return r.describeStream(region, in)
	case "GetShardIterator":
		var in getShardIteratorIn
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		return r.getShardIterator(region, in)
	case "GetRecords":
		var in getRecordsIn
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		return r.getRecords(region, in)
	}
	return nil, awserr.Newf(awserr.CodeUnknownOperation, "Unknown operation: DynamoDBStreams_20120810.%s", op)
}

// decode reads a JSON 1.0 request body; an empty body is an empty request.
func decode(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return awserr.Newf(awserr.CodeSerialization, "Unexpected value type in field %s: %s is not valid there", te.Field, te.Value)
		}
		return awserr.Newf(awserr.CodeSerialization, "Could not parse request body: %s", err.Error())
	}
	return nil
}

// --- request and response shapes ---

type listStreamsIn struct {
	TableName               *string
	Limit                   *int64
	ExclusiveStartStreamArn *string
}

type listStreamsOut struct {
	LastEvaluatedStreamArn string          `json:"LastEvaluatedStreamArn,omitempty"`
	Streams                []streamSummary `json:"Streams"`
}

type streamSummary struct {
	StreamArn   string `json:"StreamArn"`
	StreamLabel string `json:"StreamLabel"`
	TableName   string `json:"TableName"`
}

type describeStreamIn struct {
	StreamArn             *string
	Limit                 *int64
	ExclusiveStartShardId *string
	ShardFilter           *struct {
		Type    *string
		ShardId *string
	}
}

type describeStreamOut struct {
	StreamDescription streamDescription `json:"StreamDescription"`
}

type streamDescription struct {
	CreationRequestDateTime epochTime   `json:"CreationRequestDateTime"`
	KeySchema               []keyElem   `json:"KeySchema,omitempty"`
	LastEvaluatedShardId    string      `json:"LastEvaluatedShardId,omitempty"`
	Shards                  []shardDesc `json:"Shards"`
	StreamArn               string      `json:"StreamArn"`
	StreamLabel             string      `json:"StreamLabel"`
	StreamStatus            string      `json:"StreamStatus"`
	StreamViewType          string      `json:"StreamViewType"`
	TableName               string      `json:"TableName"`
}

type shardDesc struct {
	ParentShardId       string   `json:"ParentShardId,omitempty"`
	SequenceNumberRange seqRange `json:"SequenceNumberRange"`
	ShardId             string   `json:"ShardId"`
}

type seqRange struct {
	EndingSequenceNumber   string `json:"EndingSequenceNumber,omitempty"`
	StartingSequenceNumber string `json:"StartingSequenceNumber"`
}

type getShardIteratorIn struct {
	StreamArn         *string
	ShardId           *string
	ShardIteratorType *string
	SequenceNumber    *string
	Timestamp         *float64 // AT_TIMESTAMP: epoch seconds
}

type getShardIteratorOut struct {
	ShardIterator string `json:"ShardIterator"`
}

type getRecordsIn struct {
	ShardIterator *string
	Limit         *int64
}

// getRecordsOut renders the records it holds straight into the response.
type getRecordsOut struct {
	next    string
	s       *Stream
	events  []string
	records []record
}

func (o *getRecordsOut) MarshalJSON() ([]byte, error) {
	n := 64 + len(o.next)
	for i := range o.records {
		n += o.records[i].dataLen() + recordOverhead
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	if o.next != "" {
		b = append(b, `"NextShardIterator":`...)
		b = append(b, jsonString(o.next)...)
		b = append(b, ',')
	}
	b = append(b, `"Records":[`...)
	for i := range o.records {
		if i > 0 {
			b = append(b, ',')
		}
		b = o.s.appendRecord(b, &o.records[i], o.events)
	}
	return append(b, "]}"...), nil
}

// epochTime is a timestamp on the wire: epoch seconds as a JSON number,
// with milliseconds.
type epochTime time.Time

func (t epochTime) MarshalJSON() ([]byte, error) {
	ms := time.Time(t).UnixMilli()
	return strconv.AppendFloat(nil, float64(ms)/1000, 'f', -1, 64), nil
}

// --- validation, with AWS's wording ---

type verrs []string

func (v *verrs) add(format string, args ...any) { *v = append(*v, fmt.Sprintf(format, args...)) }

func (v verrs) err() error {
	switch len(v) {
	case 0:
		return nil
	case 1:
		return awserr.Validation("1 validation error detected: %s", v[0])
	}
	return awserr.Validation("%d validation errors detected: %s", len(v), strings.Join(v, "; "))
}

func (v *verrs) required(name string, p *string) {
	if p == nil {
		v.add("Value null at '%s' failed to satisfy constraint: Member must not be null", name)
	}
}

func (v *verrs) length(name string, p *string, lo, hi int) {
	if p == nil {
		return
	}
	if n := len(*p); n < lo {
		v.add("Value '%s' at '%s' failed to satisfy constraint: Member must have length greater than or equal to %d", *p, name, lo)
	} else if n > hi {
		v.add("Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", *p, name, hi)
	}
}

func (v *verrs) limit(p *int64, hi int64) {
	if p == nil {
		return
	}
	if *p < 1 {
		v.add("Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *p)
	} else if hi > 0 && *p > hi {
		v.add("Value '%d' at 'limit' failed to satisfy constraint: Member must have value less than or equal to %d", *p, hi)
	}
}

var tableNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// streamARNRE is the form of a stream ARN; validStreamARN also holds its
// table name to 255 bytes, which a counted repetition ({1,255}) in the
// pattern would do at the cost of a quarter of a megabyte of compiled
// program in every process that links the engine.
var streamARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:[^:]*:[^:]*:table/[a-zA-Z0-9_.-]+/stream/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}$`)

// validStreamARN reports whether arn is a stream ARN whose table name is
// at most 255 bytes.
func validStreamARN(arn string) bool {
	if !streamARNRE.MatchString(arn) {
		return false
	}
	_, rest, _ := strings.Cut(arn, ":table/") // the first: the parts before hold no ':'
	name, _, _ := strings.Cut(rest, "/stream/")
	return len(name) <= 255
}

// lookupStream finds a live stream of region by ARN with AWS's errors.
func (r *Registry) lookupStream(region, arn string) (*Stream, error) {
	if !validStreamARN(arn) {
		return nil, awserr.Validation("Invalid StreamArn: %s", arn)
	}
	s := r.Lookup(arn)
	if s == nil || s.region != region {
		return nil, awserr.NotFound("Requested resource not found: Stream: %s not found", arn)
	}
	return s, nil
}

func shardNotFound(id, arn string) error {
	return awserr.NotFound("Requested resource not found: Shard: %s in Stream: %s not found", id, arn)
}

// --- ListStreams ---

func (r *Registry) listStreams(region string, in listStreamsIn) (any, error) {
	var v verrs
	if in.TableName != nil && !tableNameRE.MatchString(*in.TableName) {
		v.add("Value '%s' at 'tableName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+", *in.TableName)
	}
	v.length("tableName", in.TableName, 3, 255)
	v.limit(in.Limit, MaxListStreamsLimit)
	v.length("exclusiveStartStreamArn", in.ExclusiveStartStreamArn, 37, 1024)
	if err := v.err(); err != nil {
		return nil, err
	}
	limit := MaxListStreamsLimit
	if in.Limit != nil && *in.Limit < int64(limit) {
		limit = int(*in.Limit)
	}
	if in.ExclusiveStartStreamArn != nil && !validStreamARN(*in.ExclusiveStartStreamArn) {
		// DynamoDB refuses a start that is no stream ARN at all, and
		// answers one of a stream it does not know with ResourceNotFound.
		return nil, awserr.Validation("Invalid StreamArn: %s", *in.ExclusiveStartStreamArn)
	}
	r.Tick() // drops streams whose retention has run out

	r.mu.RLock()
	defer r.mu.RUnlock()
	var after uint32
	if in.ExclusiveStartStreamArn != nil {
		// A stream of another Region is not found here, as every ARN of
		// another Region is: its ordinal would page this Region's list.
		ord, ok := r.everOrd[*in.ExclusiveStartStreamArn]
		if !ok || ARNRegion(*in.ExclusiveStartStreamArn) != region {
			return nil, awserr.NotFound("Requested resource not found: Stream: %s not found", *in.ExclusiveStartStreamArn)
		}
		after = ord
	}
	out := &listStreamsOut{Streams: []streamSummary{}}
	for _, s := range r.list {
		if s.ord <= after || s.region != region || (in.TableName != nil && s.table != *in.TableName) {
			continue
		}
		if len(out.Streams) == limit {
			out.LastEvaluatedStreamArn = out.Streams[limit-1].StreamArn
			break
		}
		out.Streams = append(out.Streams, streamSummary{StreamArn: s.arn, StreamLabel: s.label, TableName: s.table})
	}
	return out, nil
}

// --- DescribeStream ---

func (r *Registry) describeStream(region string, in describeStreamIn) (any, error) {
	var v verrs
	v.required("streamArn", in.StreamArn)
	v.length("streamArn", in.StreamArn, 37, 1024)
	v.limit(in.Limit, MaxDescribeStreamLimit)
	v.length("exclusiveStartShardId", in.ExclusiveStartShardId, 28, 65)
	var parent *string
	if f := in.ShardFilter; f != nil {
		v.length("shardFilter.shardId", f.ShardId, 28, 65)
		if f.Type != nil && *f.Type != "CHILD_SHARDS" {
			v.add("Value '%s' at 'shardFilter.type' failed to satisfy constraint: Member must satisfy enum value set: [CHILD_SHARDS]", *f.Type)
		}
		if f.Type != nil || f.ShardId != nil {
			if f.Type == nil {
				v.add("ShardFilter.Type must be CHILD_SHARDS when ShardFilter.ShardId is set")
			} else if f.ShardId == nil {
				v.add("ShardFilter.ShardId is required when ShardFilter.Type is CHILD_SHARDS")
			}
			parent = f.ShardId
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	limit := MaxDescribeStreamLimit
	if in.Limit != nil && *in.Limit < int64(limit) {
		limit = int(*in.Limit)
	}
	s, err := r.lookupStream(region, *in.StreamArn)
	if err != nil {
		return nil, err
	}
	now := r.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maintainLocked(now)
	var after uint32
	if in.ExclusiveStartShardId != nil {
		after = s.startAfterLocked(*in.ExclusiveStartShardId)
	}
	d := streamDescription{
		CreationRequestDateTime: epochTime(s.created),
		KeySchema:               s.keySchema,
		Shards:                  []shardDesc{},
		StreamArn:               s.arn,
		StreamLabel:             s.label,
		StreamStatus:            s.status,
		StreamViewType:          s.viewType,
		TableName:               s.table,
	}
	for _, sh := range s.shards {
		if sh.ord <= after || (parent != nil && sh.parent != *parent) {
			continue
		}
		if len(d.Shards) == limit {
			d.LastEvaluatedShardId = d.Shards[limit-1].ShardId
			break
		}
		if s.omittedLocked(sh.id) {
			continue
		}
		sd := shardDesc{ParentShardId: sh.parent, ShardId: sh.id, SequenceNumberRange: seqRange{StartingSequenceNumber: formatSeq(sh.start)}}
		if sh.closed() {
			sd.SequenceNumberRange.EndingSequenceNumber = formatSeq(sh.end)
		}
		d.Shards = append(d.Shards, sd)
	}
	return &describeStreamOut{StreamDescription: d}, nil
}

// startAfterLocked is the ord DescribeStream's page starts after. DynamoDB
// does not fail on an ExclusiveStartShardId it does not know (a shard
// trimmed away since the previous page, say): the page goes on after every
// shard whose ID sorts at or before it, and is empty past the last one.
func (s *Stream) startAfterLocked(id string) uint32 {
	if ord, ok := s.ordByID[id]; ok {
		return ord
	}
	var after uint32
	for _, sh := range s.shards {
		if sh.id <= id && sh.ord > after {
			after = sh.ord
		}
	}
	return after
}

// --- GetShardIterator ---

func (r *Registry) getShardIterator(region string, in getShardIteratorIn) (any, error) {
	typ, err := in.check()
	if err != nil {
		return nil, err
	}
	s, err := r.lookupStream(region, *in.StreamArn)
	if err != nil {
		return nil, err
	}
	now := r.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maintainLocked(now)
	ord, ok := s.ordByID[*in.ShardId]
	sh := s.byOrd[ord]
	if !ok || sh == nil {
		return nil, shardNotFound(*in.ShardId, s.arn)
	}
	pos, err := s.positionLocked(sh, typ, in)
	if err != nil {
		return nil, err
	}
	it := iterator{arn: s.arn, streamID: s.ord, shardID: sh.ord, pos: pos, issued: now.UnixNano(), epoch: r.epoch.Load()}
	return &getShardIteratorOut{ShardIterator: r.encodeIterator(it)}, nil
}

// check checks a GetShardIterator request on its own: the model's
// constraints, then the members its iterator type needs and refuses. It
// returns the iterator type.
func (in *getShardIteratorIn) check() (string, error) {
	var v verrs
	v.required("streamArn", in.StreamArn)
	v.length("streamArn", in.StreamArn, 37, 1024)
	v.required("shardId", in.ShardId)
	v.length("shardId", in.ShardId, 28, 65)
	v.required("shardIteratorType", in.ShardIteratorType)
	typ := ""
	if in.ShardIteratorType != nil {
		typ = *in.ShardIteratorType
		switch typ {
		case "TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER", "AT_TIMESTAMP":
		default:
			v.add("Value '%s' at 'shardIteratorType' failed to satisfy constraint: Member must satisfy enum value set: [TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, AT_TIMESTAMP]", typ)
		}
	}
	v.length("sequenceNumber", in.SequenceNumber, 21, 40)
	if err := v.err(); err != nil {
		return "", err
	}
	bySeq := typ == "AT_SEQUENCE_NUMBER" || typ == "AFTER_SEQUENCE_NUMBER"
	if bySeq && in.SequenceNumber == nil {
		return "", awserr.Validation("SequenceNumber is required when ShardIteratorType is %s", typ)
	}
	if bySeq && !validSeqSyntax(*in.SequenceNumber) {
		return "", awserr.Validation("Invalid SequenceNumber: %s is not a decimal sequence number", *in.SequenceNumber)
	}
	if !bySeq && in.SequenceNumber != nil {
		return "", awserr.Validation("SequenceNumber must not be set when ShardIteratorType is %s", typ)
	}
	if typ == "AT_TIMESTAMP" && in.Timestamp == nil {
		return "", awserr.Validation("Timestamp is required when ShardIteratorType is AT_TIMESTAMP")
	}
	if typ != "AT_TIMESTAMP" && in.Timestamp != nil {
		return "", awserr.Validation("Timestamp must not be set when ShardIteratorType is %s", typ)
	}
	return typ, nil
}

// positionLocked returns the position in sh that an iterator of type typ
// starts at. s.mu is held.
func (s *Stream) positionLocked(sh *shard, typ string, in getShardIteratorIn) (uint64, error) {
	switch typ {
	case "TRIM_HORIZON":
		return 0, nil
	case "LATEST":
		return sh.afterLast(s.lastSeq), nil
	case "AT_TIMESTAMP":
		return s.atTimestampLocked(sh, *in.Timestamp), nil
	}
	// The shard's own StartingSequenceNumber is in range even before
	// the shard holds a record (a fresh shard's is above the stream's
	// last number); DynamoDB accepts it, and reading from it returns
	// the shard's first record on.
	n := seqValue(*in.SequenceNumber)
	if n < sh.start || (sh.closed() && n > sh.end) || (n > s.lastSeq && n != sh.start) {
		return 0, awserr.Validation("Invalid SequenceNumber: %s is outside the range of shard %s", *in.SequenceNumber, sh.id)
	}
	pos := n
	if typ == "AFTER_SEQUENCE_NUMBER" {
		pos = n + 1
	}
	if pos <= sh.trimmed {
		return 0, awserr.Newf(awserr.CodeTrimmedDataAccess,
			"Attempted to access trimmed data: sequence number %s of shard %s is older than its trim horizon", *in.SequenceNumber, sh.id)
	}
	return pos, nil
}

// atTimestampLocked returns the position of the first record of sh
// created at or after ts (epoch seconds); past the last record when there
// is none (like LATEST). s.mu is held.
func (s *Stream) atTimestampLocked(sh *shard, ts float64) uint64 {
	// The wire carries epoch seconds with milliseconds; round to the
	// millisecond so float error cannot skip a record.
	ms := math.Round(ts * 1e3)
	pos := sh.afterLast(s.lastSeq)
	switch {
	case ms <= float64(math.MinInt64/1e6) || ms != ms:
		pos = 0
	case ms < float64(math.MaxInt64/1e6):
		at := int64(ms) * 1e6
		if i := sh.recs.search(func(r *record) bool { return r.at >= at }); i < sh.recs.Len() {
			pos = sh.recs.at(i).seq
		}
	}
	return pos
}

// --- GetRecords ---

func (r *Registry) getRecords(region string, in getRecordsIn) (any, error) {
	var v verrs
	v.required("shardIterator", in.ShardIterator)
	v.length("shardIterator", in.ShardIterator, 1, 2048)
	v.limit(in.Limit, MaxGetRecordsLimit)
	if err := v.err(); err != nil {
		return nil, err
	}
	limit := MaxGetRecordsLimit
	if in.Limit != nil {
		limit = int(*in.Limit)
	}
	if r.takeThrottle() {
		return nil, awserr.New(awserr.CodeLimitExceeded, "Rate exceeded for shard: too many GetRecords requests (injected throttle)")
	}
	it, ok := r.decodeIterator(*in.ShardIterator)
	if !ok {
		return nil, awserr.Validation("Invalid ShardIterator: the iterator is malformed or was not issued by this server")
	}
	now := r.opts.Now()
	if r.expired(it, now) {
		return nil, awserr.Newf(awserr.CodeExpiredIterator,
			"Iterator expired. The iterator was created at %s and is valid for %s (now %s)",
			time.Unix(0, it.issued).UTC().Format(time.RFC3339Nano), IteratorLifetime, now.UTC().Format(time.RFC3339Nano))
	}
	r.mu.RLock()
	s := r.byOrd[it.streamID]
	r.mu.RUnlock()
	if s == nil || s.arn != it.arn || s.region != region {
		return nil, awserr.NotFound("Requested resource not found: Stream: %s not found", it.arn)
	}
	s.mu.Lock()
	s.maintainLocked(now)
	sh := s.byOrd[it.shardID]
	if sh == nil {
		s.mu.Unlock()
		return nil, awserr.NotFound("Requested resource not found: Shard does not exist in Stream: %s", it.arn)
	}
	if it.pos != 0 && it.pos <= sh.trimmed {
		s.mu.Unlock()
		return nil, awserr.Newf(awserr.CodeTrimmedDataAccess,
			"Attempted to access trimmed data: shard %s has been trimmed past the iterator's position", sh.id)
	}
	i := sh.recs.search(func(r *record) bool { return r.seq >= it.pos })
	out := &getRecordsOut{s: s, events: s.events}
	bytes := 0
	j := i
	for ; j < sh.recs.Len() && j-i < limit; j++ {
		n := sh.recs.at(j).dataLen() + recordOverhead
		if j > i && bytes+n > MaxGetRecordsBytes {
			break
		}
		bytes += n
	}
	out.records = sh.recs.slice(i, j)
	next := it.pos
	if j > i {
		next = sh.recs.at(j-1).seq + 1
	}
	drained := sh.closed() && j == sh.recs.Len()
	s.mu.Unlock()
	if !drained {
		nit := iterator{arn: it.arn, streamID: it.streamID, shardID: it.shardID, pos: next, issued: now.UnixNano(), epoch: r.epoch.Load()}
		out.next = r.encodeIterator(nit)
	}
	return out, nil
}

func (r *Registry) takeThrottle() bool {
	for {
		n := r.throttle.Load()
		if n <= 0 {
			return false
		}
		if r.throttle.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
