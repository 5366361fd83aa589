package stream

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

func TestCreateARNAndLabel(t *testing.T) {
	e := newEnv(t, Options{Region: "eu-west-1", AccountID: "123456789012"})
	a := e.reg.Create("", "orders", NewAndOldImages)
	b := e.reg.Create("", "orders", KeysOnly) // same millisecond
	c := e.reg.Create("", "users", NewImage)
	if got, want := a.ARN(), "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-11-22T06:13:59.123"; got != want {
		t.Fatalf("ARN = %q, want %q", got, want)
	}
	if a.Label() == b.Label() {
		t.Fatalf("two streams of one table share label %q", a.Label())
	}
	if b.Label() != "2026-11-22T06:13:59.124" {
		t.Fatalf("second label = %q", b.Label())
	}
	if c.Label() != "2026-11-22T06:13:59.123" {
		t.Fatalf("other table's label = %q", c.Label())
	}
	if a.ViewType() != NewAndOldImages || a.TableName() != "orders" || a.Status() != StatusEnabled {
		t.Fatalf("stream fields: %s %s %s", a.ViewType(), a.TableName(), a.Status())
	}
	if e.reg.Lookup(a.ARN()) != a {
		t.Fatal("Lookup does not find the stream")
	}
}

func TestRecordWireShape(t *testing.T) {
	full := attr.Item{"pk": attr.Str("k1"), "n": attr.MustNum("1.5"), "exp": attr.MustNum("1700000000")}
	old := attr.Item{"pk": attr.Str("k1"), "n": attr.MustNum("1")}
	cases := []struct {
		view             string
		change           Change
		wantNew, wantOld bool
		service          bool
	}{
		{KeysOnly, Change{EventName: "MODIFY", Keys: key("k1"), Old: old, New: full}, false, false, false},
		{NewImage, Change{EventName: "MODIFY", Keys: key("k1"), Old: old, New: full}, true, false, false},
		{OldImage, Change{EventName: "MODIFY", Keys: key("k1"), Old: old, New: full}, false, true, false},
		{NewAndOldImages, Change{EventName: "MODIFY", Keys: key("k1"), Old: old, New: full}, true, true, false},
		{NewAndOldImages, Change{EventName: "INSERT", Keys: key("k1"), New: full}, true, false, false},
		{NewAndOldImages, Change{EventName: "REMOVE", Keys: key("k1"), Old: full}, false, true, false},
		{NewAndOldImages, Change{EventName: "REMOVE", Keys: key("k1"), Old: full, Service: true}, false, true, true},
		{KeysOnly, Change{EventName: "REMOVE", Keys: key("k1"), Old: full, Service: true}, false, false, true},
		{OldImage, Change{EventName: "INSERT", Keys: key("k1"), New: full}, false, false, false},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d-%s-%s", i, tc.view, tc.change.EventName), func(t *testing.T) {
			e := newEnv(t, Options{})
			s := e.reg.Create("", "t1", tc.view)
			s.Append(tc.change)
			sh := s.Shards()
			recs := e.readShard(t, s.ARN(), sh[0].ID, 0)
			if len(recs) != 1 {
				t.Fatalf("got %d records", len(recs))
			}
			r := recs[0]
			if aws.ToString(r.EventID) == "" || len(aws.ToString(r.EventID)) != 32 {
				t.Errorf("eventID = %q", aws.ToString(r.EventID))
			}
			if string(r.EventName) != tc.change.EventName || aws.ToString(r.EventVersion) != "1.1" ||
				aws.ToString(r.EventSource) != "aws:dynamodb" || aws.ToString(r.AwsRegion) != "us-east-1" {
				t.Errorf("header fields: %s %s %s %s", r.EventName, aws.ToString(r.EventVersion), aws.ToString(r.EventSource), aws.ToString(r.AwsRegion))
			}
			d := r.Dynamodb
			if d == nil {
				t.Fatal("no dynamodb member")
			}
			if d.ApproximateCreationDateTime == nil || d.ApproximateCreationDateTime.Unix() != e.clk.Now().Unix() {
				t.Errorf("ApproximateCreationDateTime = %v", d.ApproximateCreationDateTime)
			}
			if string(d.StreamViewType) != tc.view {
				t.Errorf("StreamViewType = %s", d.StreamViewType)
			}
			if pk, ok := d.Keys["pk"].(*types.AttributeValueMemberS); !ok || pk.Value != "k1" || len(d.Keys) != 1 {
				t.Errorf("Keys = %#v", d.Keys)
			}
			if (d.NewImage != nil) != tc.wantNew || (d.OldImage != nil) != tc.wantOld {
				t.Errorf("NewImage present %v (want %v), OldImage present %v (want %v)", d.NewImage != nil, tc.wantNew, d.OldImage != nil, tc.wantOld)
			}
			if tc.wantNew {
				if n, ok := d.NewImage["n"].(*types.AttributeValueMemberN); !ok || n.Value != "1.5" {
					t.Errorf("NewImage.n = %#v", d.NewImage["n"])
				}
			}
			if aws.ToString(d.SequenceNumber) != sh[0].Start && !seqLess(sh[0].Start, aws.ToString(d.SequenceNumber)) {
				t.Errorf("SequenceNumber %s before shard start %s", aws.ToString(d.SequenceNumber), sh[0].Start)
			}
			if d.SizeBytes == nil || *d.SizeBytes <= 0 {
				t.Errorf("SizeBytes = %v", d.SizeBytes)
			}
			if tc.service {
				if r.UserIdentity == nil || aws.ToString(r.UserIdentity.PrincipalId) != "dynamodb.amazonaws.com" || aws.ToString(r.UserIdentity.Type) != "Service" {
					t.Errorf("userIdentity = %#v", r.UserIdentity)
				}
			} else if r.UserIdentity != nil {
				t.Errorf("user change carries userIdentity %#v", r.UserIdentity)
			}
		})
	}
}

// TestRecordRawJSON checks the exact member names on the wire.
func TestRecordRawJSON(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t1", NewAndOldImages)
	s.Append(Change{EventName: "REMOVE", Keys: key("a"), Old: attr.Item{"pk": attr.Str("a"), "x": attr.Bool(true)}, Service: true})
	it := getIter(t, e, s.ARN(), s.Shards()[0].ID, "TRIM_HORIZON", "")
	resp, err := e.reg.Handle(bg, "", "GetRecords", []byte(`{"ShardIterator":`+strconv.Quote(it)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp)
	var out struct {
		Records []map[string]json.RawMessage
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, b)
	}
	rec := out.Records[0]
	for _, k := range []string{"eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "dynamodb", "userIdentity"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record lacks %q: %s", k, b)
		}
	}
	if got := string(rec["userIdentity"]); got != `{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}` {
		t.Errorf("userIdentity = %s", got)
	}
	var dyn map[string]json.RawMessage
	_ = json.Unmarshal(rec["dynamodb"], &dyn)
	for _, k := range []string{"ApproximateCreationDateTime", "Keys", "OldImage", "SequenceNumber", "SizeBytes", "StreamViewType"} {
		if _, ok := dyn[k]; !ok {
			t.Errorf("dynamodb lacks %q", k)
		}
	}
	if _, err := strconv.ParseInt(string(dyn["ApproximateCreationDateTime"]), 10, 64); err != nil {
		t.Errorf("ApproximateCreationDateTime is not epoch seconds: %s", dyn["ApproximateCreationDateTime"])
	}
	if string(dyn["OldImage"]) != `{"pk":{"S":"a"},"x":{"BOOL":true}}` {
		t.Errorf("OldImage = %s", dyn["OldImage"])
	}
}

func seqLess(a, b string) bool {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x.Cmp(y) < 0
}

func getIter(t testing.TB, e *env, arn, shard, typ, seq string) string {
	t.Helper()
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorType(typ)}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	}
	out, err := e.client.GetShardIterator(bg, in)
	if err != nil {
		t.Fatalf("GetShardIterator %s %s: %v", typ, seq, err)
	}
	return aws.ToString(out.ShardIterator)
}

// walkLineage reads every shard of the stream, parents before children, and
// returns each key's record payload values in read order, plus the root of
// the lineage each key was read from.
func walkLineage(t *testing.T, e *env, arn string) (map[string][]string, map[string]string) {
	t.Helper()
	_, shards := e.describeAll(t, arn, 0, nil)
	byID := map[string]types.Shard{}
	for _, sh := range shards {
		byID[aws.ToString(sh.ShardId)] = sh
	}
	root := func(id string) string {
		for {
			p := aws.ToString(byID[id].ParentShardId)
			if _, ok := byID[p]; p == "" || !ok {
				return id
			}
			id = p
		}
	}
	done := map[string]bool{}
	seq := map[string][]string{}
	rootOf := map[string]string{}
	var visit func(id string)
	visit = func(id string) {
		if done[id] {
			return
		}
		if p := aws.ToString(byID[id].ParentShardId); p != "" {
			if _, ok := byID[p]; ok {
				visit(p)
			}
		}
		done[id] = true
		sh := byID[id]
		rng := sh.SequenceNumberRange
		recs := e.readShard(t, arn, id, 0)
		prev := ""
		for _, r := range recs {
			sn := aws.ToString(r.Dynamodb.SequenceNumber)
			if seqLess(sn, aws.ToString(rng.StartingSequenceNumber)) {
				t.Fatalf("record %s below shard start %s", sn, aws.ToString(rng.StartingSequenceNumber))
			}
			if rng.EndingSequenceNumber != nil && seqLess(aws.ToString(rng.EndingSequenceNumber), sn) {
				t.Fatalf("record %s above shard end %s", sn, aws.ToString(rng.EndingSequenceNumber))
			}
			if prev != "" && !seqLess(prev, sn) {
				t.Fatalf("sequence numbers not increasing in %s: %s then %s", id, prev, sn)
			}
			prev = sn
			k := r.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS).Value
			v := r.Dynamodb.NewImage["v"].(*types.AttributeValueMemberN).Value
			seq[k] = append(seq[k], v)
			rt := root(id)
			if old, ok := rootOf[k]; ok && old != rt {
				t.Fatalf("key %s in two lineages: %s and %s", k, old, rt)
			}
			rootOf[k] = rt
		}
	}
	for _, sh := range shards {
		visit(aws.ToString(sh.ShardId))
	}
	return seq, rootOf
}

func TestLineageAfterRolloverAndSplit(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		ops  func(e *env, s *Stream, step int)
	}{
		{"rollover-by-count", Options{Shards: 3, RolloverRecords: 7}, nil},
		{"forced-rollover", Options{Shards: 2}, func(e *env, s *Stream, step int) {
			if step%25 == 0 {
				if err := e.reg.Rollover(s.ARN()); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"split", Options{Shards: 1}, func(e *env, s *Stream, step int) {
			if step%40 == 0 {
				for _, sh := range s.Shards() {
					if sh.Open {
						if err := e.reg.Split(s.ARN(), sh.ID); err != nil {
							t.Fatal(err)
						}
						break
					}
				}
			}
		}},
		{"rollover-by-age", Options{Shards: 2, Rollover: time.Hour}, func(e *env, s *Stream, step int) {
			e.clk.Advance(7 * time.Minute)
			if step%30 == 0 {
				e.reg.Tick()
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			s := e.reg.Create("", "t", NewImage)
			want := map[string][]string{}
			for step := 1; step <= 200; step++ {
				k := fmt.Sprintf("key-%d", step%13)
				v := strconv.Itoa(step)
				s.Append(Change{EventName: "MODIFY", Keys: key(k), New: attr.Item{"pk": attr.Str(k), "v": attr.MustNum(v)}})
				want[k] = append(want[k], v)
				if tc.ops != nil {
					tc.ops(e, s, step)
				}
			}
			shards := s.Shards()
			if len(shards) <= tc.opts.Shards {
				t.Fatalf("no new shards: %d", len(shards))
			}
			open := 0
			for _, sh := range shards {
				if sh.Open {
					open++
				}
			}
			if tc.name != "split" && open != tc.opts.Shards {
				t.Fatalf("%d open shards, want %d", open, tc.opts.Shards)
			}
			got, _ := walkLineage(t, e, s.ARN())
			for k, w := range want {
				if strings.Join(got[k], ",") != strings.Join(w, ",") {
					t.Errorf("key %s read %v, want %v", k, got[k], w)
				}
			}
		})
	}
}

func TestSplitChildrenAndShardFilter(t *testing.T) {
	e := newEnv(t, Options{Shards: 2})
	s := e.reg.Create("", "t", KeysOnly)
	first := s.Shards()[0].ID
	if err := e.reg.Split(s.ARN(), first); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Split(s.ARN(), first); err == nil {
		t.Fatal("split of a closed shard succeeded")
	}
	if err := e.reg.Split(s.ARN(), "shardId-00000000000000000000-00000000"); err == nil {
		t.Fatal("split of an unknown shard succeeded")
	}
	_, kids := e.describeAll(t, s.ARN(), 0, &types.ShardFilter{Type: types.ShardFilterTypeChildShards, ShardId: aws.String(first)})
	if len(kids) != 2 {
		t.Fatalf("CHILD_SHARDS returned %d shards", len(kids))
	}
	for _, k := range kids {
		if aws.ToString(k.ParentShardId) != first || k.SequenceNumberRange.EndingSequenceNumber != nil {
			t.Fatalf("child %+v", k)
		}
	}
	_, all := e.describeAll(t, s.ARN(), 0, nil)
	if len(all) != 4 {
		t.Fatalf("%d shards, want 4", len(all))
	}
	parent := all[0]
	if aws.ToString(parent.ShardId) != first || parent.SequenceNumberRange.EndingSequenceNumber == nil {
		t.Fatalf("parent %+v not closed", parent)
	}
	if !seqLess(aws.ToString(parent.SequenceNumberRange.EndingSequenceNumber), aws.ToString(kids[0].SequenceNumberRange.StartingSequenceNumber)) {
		t.Fatal("child starts before its parent ends")
	}
	// The children cover exactly the parent's hash range.
	var lo, hi uint64
	for _, si := range s.Shards() {
		if si.ID == first {
			lo, hi = si.HashLo, si.HashHi
		}
	}
	var kidsInfo []ShardInfo
	for _, si := range s.Shards() {
		if si.ParentID == first {
			kidsInfo = append(kidsInfo, si)
		}
	}
	sort.Slice(kidsInfo, func(i, j int) bool { return kidsInfo[i].HashLo < kidsInfo[j].HashLo })
	if kidsInfo[0].HashLo != lo || kidsInfo[1].HashHi != hi || kidsInfo[0].HashHi+1 != kidsInfo[1].HashLo {
		t.Fatalf("children ranges %+v do not partition %d..%d", kidsInfo, lo, hi)
	}
}

func TestDescribeStreamPaging(t *testing.T) {
	e := newEnv(t, Options{Shards: 1, RolloverRecords: 1})
	s := e.reg.Create("", "t", KeysOnly)
	s.SetKeySchema("pk", "sk")
	for i := 0; i < 250; i++ {
		s.Append(Change{EventName: "INSERT", Keys: key("k")})
	}
	want := s.Shards()
	if len(want) != 251 {
		t.Fatalf("%d shards, want 251", len(want))
	}
	for _, limit := range []int32{0, 100, 7, 1} {
		t.Run(fmt.Sprint("limit-", limit), func(t *testing.T) {
			desc, got := e.describeAll(t, s.ARN(), limit, nil)
			if len(got) != len(want) {
				t.Fatalf("paged %d shards, want %d", len(got), len(want))
			}
			for i := range got {
				if aws.ToString(got[i].ShardId) != want[i].ID || aws.ToString(got[i].ParentShardId) != want[i].ParentID {
					t.Fatalf("shard %d = %s (parent %s), want %s", i, aws.ToString(got[i].ShardId), aws.ToString(got[i].ParentShardId), want[i].ID)
				}
			}
			if desc.StreamStatus != types.StreamStatusEnabled || desc.StreamViewType != types.StreamViewTypeKeysOnly ||
				aws.ToString(desc.TableName) != "t" || aws.ToString(desc.StreamLabel) != s.Label() || aws.ToString(desc.StreamArn) != s.ARN() {
				t.Fatalf("description %+v", desc)
			}
			if len(desc.KeySchema) != 2 || aws.ToString(desc.KeySchema[0].AttributeName) != "pk" || desc.KeySchema[0].KeyType != types.KeyTypeHash ||
				aws.ToString(desc.KeySchema[1].AttributeName) != "sk" || desc.KeySchema[1].KeyType != types.KeyTypeRange {
				t.Fatalf("KeySchema %+v", desc.KeySchema)
			}
			if desc.CreationRequestDateTime == nil || !desc.CreationRequestDateTime.Equal(e.clk.Now()) {
				t.Fatalf("CreationRequestDateTime %v", desc.CreationRequestDateTime)
			}
		})
	}
	// One page of the default size holds 100 shards.
	out, err := e.client.DescribeStream(bg, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.ARN())})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.StreamDescription.Shards) != 100 || aws.ToString(out.StreamDescription.LastEvaluatedShardId) != want[99].ID {
		t.Fatalf("first page: %d shards, last evaluated %s", len(out.StreamDescription.Shards), aws.ToString(out.StreamDescription.LastEvaluatedShardId))
	}
}

func TestIteratorTypes(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", NewImage)
	for i := 1; i <= 5; i++ {
		s.Append(Change{EventName: "INSERT", Keys: key("k"), New: attr.Item{"pk": attr.Str("k"), "v": attr.MustNum(strconv.Itoa(i))}})
	}
	shard := s.Shards()[0].ID
	all := e.readShard(t, s.ARN(), shard, 0)
	if len(all) != 5 {
		t.Fatalf("%d records", len(all))
	}
	seqOf := func(i int) string { return aws.ToString(all[i].Dynamodb.SequenceNumber) }
	cases := []struct {
		typ, seq string
		want     []string // values read
	}{
		{"TRIM_HORIZON", "", []string{"1", "2", "3", "4", "5"}},
		{"LATEST", "", nil},
		{"AT_SEQUENCE_NUMBER", seqOf(2), []string{"3", "4", "5"}},
		{"AFTER_SEQUENCE_NUMBER", seqOf(2), []string{"4", "5"}},
		{"AFTER_SEQUENCE_NUMBER", seqOf(4), nil},
		{"AT_SEQUENCE_NUMBER", s.Shards()[0].Start, []string{"1", "2", "3", "4", "5"}},
	}
	for _, tc := range cases {
		t.Run(tc.typ+tc.seq, func(t *testing.T) {
			it := getIter(t, e, s.ARN(), shard, tc.typ, tc.seq)
			var got []string
			for _, r := range e.drain(t, aws.String(it), 2) {
				got = append(got, r.Dynamodb.NewImage["v"].(*types.AttributeValueMemberN).Value)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("read %v, want %v", got, tc.want)
			}
		})
	}
	// LATEST sees what comes after it.
	latest := getIter(t, e, s.ARN(), shard, "LATEST", "")
	s.Append(Change{EventName: "INSERT", Keys: key("k"), New: attr.Item{"pk": attr.Str("k"), "v": attr.MustNum("6")}})
	got := e.drain(t, aws.String(latest), 0)
	if len(got) != 1 || got[0].Dynamodb.NewImage["v"].(*types.AttributeValueMemberN).Value != "6" {
		t.Fatalf("LATEST read %d records", len(got))
	}
}

func TestClosedShardDrainEndsIteration(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", KeysOnly)
	for i := 0; i < 5; i++ {
		s.Append(Change{EventName: "INSERT", Keys: key(strconv.Itoa(i))})
	}
	shard := s.Shards()[0].ID
	if err := e.reg.Rollover(s.ARN()); err != nil {
		t.Fatal(err)
	}
	it := aws.String(getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", ""))
	n := 0
	for it != nil {
		out, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(2)})
		if err != nil {
			t.Fatal(err)
		}
		n += len(out.Records)
		it = out.NextShardIterator
		if n > 5 {
			t.Fatal("read too many")
		}
	}
	if n != 5 {
		t.Fatalf("read %d records before NextShardIterator became absent", n)
	}
	// An empty closed shard ends at once; LATEST on a closed shard too.
	e.reg.Rollover(s.ARN())
	empty := s.Shards()[1]
	if empty.Open || empty.Records != 0 {
		t.Fatalf("shard %+v", empty)
	}
	for _, typ := range []string{"TRIM_HORIZON", "LATEST", "AFTER_SEQUENCE_NUMBER"} {
		seq := ""
		if typ == "AFTER_SEQUENCE_NUMBER" {
			seq = empty.End
		}
		out, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(getIter(t, e, s.ARN(), empty.ID, typ, seq))})
		if err != nil || len(out.Records) != 0 || out.NextShardIterator != nil {
			t.Fatalf("%s on empty closed shard: %v, %d records, next %v", typ, err, len(out.Records), out.NextShardIterator)
		}
	}
}

func TestIteratorExpiry(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", KeysOnly)
	s.Append(Change{EventName: "INSERT", Keys: key("a")})
	shard := s.Shards()[0].ID
	cases := []struct {
		name   string
		before func()
		want   string
	}{
		{"fresh", func() {}, ""},
		{"at-15-minutes", func() { e.clk.Advance(15 * time.Minute) }, ""},
		{"past-15-minutes", func() { e.clk.Advance(15*time.Minute + time.Second) }, "ExpiredIteratorException"},
		{"expire-now", func() { e.reg.ExpireIterators() }, "ExpiredIteratorException"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", "")
			tc.before()
			_, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it)})
			if errCode(err) != tc.want {
				t.Fatalf("GetRecords error %v, want %q", err, tc.want)
			}
		})
	}
	// NextShardIterator is a fresh iterator with its own 15 minutes.
	it := getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", "")
	e.clk.Advance(10 * time.Minute)
	out, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it)})
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Minute)
	if _, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: out.NextShardIterator}); err != nil {
		t.Fatalf("NextShardIterator expired early: %v", err)
	}
}

func TestTrimming(t *testing.T) {
	e := newEnv(t, Options{Retention: time.Hour})
	s := e.reg.Create("", "t", NewImage)
	put := func(v string) {
		s.Append(Change{EventName: "INSERT", Keys: key("k"), New: attr.Item{"pk": attr.Str("k"), "v": attr.MustNum(v)}})
	}
	put("1")
	put("2")
	shard := s.Shards()[0].ID
	old := e.readShard(t, s.ARN(), shard, 0)
	e.clk.Advance(30 * time.Minute)
	put("3")
	e.clk.Advance(31 * time.Minute) // records 1, 2 are now older than an hour
	e.reg.Tick()

	got := e.readShard(t, s.ARN(), shard, 0)
	if len(got) != 1 || got[0].Dynamodb.NewImage["v"].(*types.AttributeValueMemberN).Value != "3" {
		t.Fatalf("TRIM_HORIZON after trim read %d records", len(got))
	}
	for _, typ := range []string{"AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"} {
		_, err := e.client.GetShardIterator(bg, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.ARN()), ShardId: aws.String(shard),
			ShardIteratorType: types.ShardIteratorType(typ), SequenceNumber: old[0].Dynamodb.SequenceNumber})
		if errCode(err) != "TrimmedDataAccessException" {
			t.Fatalf("%s before trim horizon: %v", typ, err)
		}
	}
	// AFTER the last trimmed record is still fine: nothing was lost after it.
	if _, err := e.client.GetShardIterator(bg, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.ARN()), ShardId: aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: old[1].Dynamodb.SequenceNumber}); err != nil {
		t.Fatalf("AFTER last trimmed: %v", err)
	}

	// Trim (fault injection) drops everything before a time. A TRIM_HORIZON
	// iterator that has read nothing moves with the horizon; one that has
	// read past trimmed records does not.
	thIt := getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", "")
	readIt := getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", "")
	first, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(readIt), Limit: aws.Int32(1)})
	if err != nil || len(first.Records) != 1 {
		t.Fatalf("read before Trim: %v", err)
	}
	put("4")
	if err := e.reg.Trim(s.ARN(), e.clk.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := e.readShard(t, s.ARN(), shard, 0); len(got) != 0 {
		t.Fatalf("after Trim read %d records", len(got))
	}
	if out, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(thIt)}); err != nil || len(out.Records) != 0 {
		t.Fatalf("unread TRIM_HORIZON iterator after Trim: %v", err)
	}
	if _, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: first.NextShardIterator}); errCode(err) != "TrimmedDataAccessException" {
		t.Fatalf("iterator positioned on trimmed records: %v", err)
	}
	if err := e.reg.Trim("arn:aws:dynamodb:us-east-1:000000000000:table/x/stream/2026-01-01T00:00:00.000", e.clk.Now()); err == nil {
		t.Fatal("Trim of an unknown stream succeeded")
	}

	// Closed shards whose records are all gone disappear after retention.
	if err := e.reg.Rollover(s.ARN()); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(59 * time.Minute)
	e.reg.Tick()
	if n := len(s.Shards()); n != 2 {
		t.Fatalf("%d shards before retention passed, want 2", n)
	}
	e.clk.Advance(2 * time.Minute)
	_, shards := e.describeAll(t, s.ARN(), 0, nil)
	if len(shards) != 1 || aws.ToString(shards[0].ParentShardId) != shard {
		t.Fatalf("after retention DescribeStream lists %d shards", len(shards))
	}
	if _, err := e.client.GetShardIterator(bg, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.ARN()), ShardId: aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon}); errCode(err) != "ResourceNotFoundException" {
		t.Fatalf("iterator on removed shard: %v", err)
	}
}

func TestGetRecordsLimits(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", NewImage)
	big := strings.Repeat("x", 300*1024)
	for i := 0; i < 10; i++ {
		k := strconv.Itoa(i)
		s.Append(Change{EventName: "INSERT", Keys: key(k), New: attr.Item{"pk": attr.Str(k), "blob": attr.Str(big)}})
	}
	for i := 0; i < 1500; i++ {
		s.Append(Change{EventName: "INSERT", Keys: key("small")})
	}
	shard := s.Shards()[0].ID
	it := aws.String(getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", ""))
	var sizes []int
	total := 0
	for i := 0; i < 50 && total < 1510; i++ {
		out, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) > 1000 {
			t.Fatalf("%d records in one response", len(out.Records))
		}
		sizes = append(sizes, len(out.Records))
		total += len(out.Records)
		it = out.NextShardIterator
	}
	if total != 1510 {
		t.Fatalf("read %d records, want 1510 (pages %v)", total, sizes)
	}
	if sizes[0] != 3 { // three 300 KB records fit in 1 MB, four do not
		t.Fatalf("first page %d records (pages %v)", sizes[0], sizes)
	}
	// The rendered response stays within 1 MB.
	resp, err := e.reg.Handle(bg, "", "GetRecords", []byte(`{"ShardIterator":"`+getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", "")+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(resp); len(b) > MaxGetRecordsBytes+4096 {
		t.Fatalf("response of %d bytes", len(b))
	}
	for _, c := range []struct {
		limit int
		want  string
	}{{0, "ValidationException"}, {-1, "ValidationException"}, {1001, "ValidationException"}, {1000, ""}, {1, ""}} {
		it := getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", "")
		_, err := e.reg.Handle(bg, "", "GetRecords", []byte(fmt.Sprintf(`{"ShardIterator":%q,"Limit":%d}`, it, c.limit)))
		if errCode(err) != c.want {
			t.Errorf("Limit %d: %v, want %q", c.limit, err, c.want)
		}
	}
}

func TestThrottle(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", KeysOnly)
	it := aws.String(getIter(t, e, s.ARN(), s.Shards()[0].ID, "TRIM_HORIZON", ""))
	e.reg.ThrottleGetRecords(2)
	for i, want := range []string{"LimitExceededException", "LimitExceededException", "", ""} {
		_, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: it}, func(o *dynamodbstreams.Options) {
			o.Retryer = aws.NopRetryer{} // the SDK would retry the throttle
		})
		if errCode(err) != want {
			t.Fatalf("call %d: %v, want %q", i, err, want)
		}
	}
}

func TestDisableAndRemoval(t *testing.T) {
	e := newEnv(t, Options{Shards: 3, Retention: time.Hour})
	s := e.reg.Create("", "t", KeysOnly)
	other := e.reg.Create("", "u", KeysOnly)
	s.Append(Change{EventName: "INSERT", Keys: key("a")})
	e.reg.Disable(s.ARN())
	e.reg.Disable("arn:unknown") // ignored
	s.Append(Change{EventName: "INSERT", Keys: key("b")})
	desc, shards := e.describeAll(t, s.ARN(), 0, nil)
	if desc.StreamStatus != types.StreamStatusDisabled {
		t.Fatalf("status %s", desc.StreamStatus)
	}
	n := 0
	for _, sh := range shards {
		if sh.SequenceNumberRange.EndingSequenceNumber == nil {
			t.Fatalf("shard %s still open", aws.ToString(sh.ShardId))
		}
		n += len(e.readShard(t, s.ARN(), aws.ToString(sh.ShardId), 0))
	}
	if n != 1 {
		t.Fatalf("disabled stream holds %d records, want 1", n)
	}
	if err := e.reg.Rollover(s.ARN()); err == nil {
		t.Fatal("rollover of a disabled stream succeeded")
	}
	e.clk.Advance(61 * time.Minute)
	e.reg.Tick()
	if _, err := e.client.DescribeStream(bg, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.ARN())}); errCode(err) != "ResourceNotFoundException" {
		t.Fatalf("DescribeStream of a removed stream: %v", err)
	}
	out, err := e.client.ListStreams(bg, &dynamodbstreams.ListStreamsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Streams) != 1 || aws.ToString(out.Streams[0].StreamArn) != other.ARN() {
		t.Fatalf("ListStreams after removal: %+v", out.Streams)
	}
}

func TestListStreams(t *testing.T) {
	e := newEnv(t, Options{})
	var arns []string
	for i := 0; i < 7; i++ {
		table := "alpha"
		if i%2 == 1 {
			table = "beta"
		}
		arns = append(arns, e.reg.Create("", table, KeysOnly).ARN())
	}
	page := func(table string, limit int32) []string {
		var got []string
		var start *string
		for i := 0; i < 100; i++ {
			in := &dynamodbstreams.ListStreamsInput{ExclusiveStartStreamArn: start}
			if table != "" {
				in.TableName = aws.String(table)
			}
			if limit > 0 {
				in.Limit = aws.Int32(limit)
			}
			out, err := e.client.ListStreams(bg, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range out.Streams {
				if table != "" && aws.ToString(s.TableName) != table {
					t.Fatalf("filter %s returned %s", table, aws.ToString(s.TableName))
				}
				if !strings.HasSuffix(aws.ToString(s.StreamArn), "/stream/"+aws.ToString(s.StreamLabel)) {
					t.Fatalf("label %s does not end ARN %s", aws.ToString(s.StreamLabel), aws.ToString(s.StreamArn))
				}
				got = append(got, aws.ToString(s.StreamArn))
			}
			if out.LastEvaluatedStreamArn == nil {
				return got
			}
			start = out.LastEvaluatedStreamArn
		}
		t.Fatal("ListStreams paging does not end")
		return nil
	}
	if got := page("", 0); strings.Join(got, " ") != strings.Join(arns, " ") {
		t.Fatalf("all streams %v", got)
	}
	if got := page("", 2); strings.Join(got, " ") != strings.Join(arns, " ") {
		t.Fatalf("paged by 2: %v", got)
	}
	if got := page("beta", 1); len(got) != 3 {
		t.Fatalf("beta streams %v", got)
	}
	if got := page("gamma", 0); len(got) != 0 {
		t.Fatalf("gamma streams %v", got)
	}
}

func TestValidation(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", KeysOnly)
	s.Append(Change{EventName: "INSERT", Keys: key("a")})
	arn := s.ARN()
	shard := s.Shards()[0].ID
	good := getIter(t, e, arn, shard, "TRIM_HORIZON", "")
	missingARN := strings.Replace(arn, "/t/", "/nope/", 1)
	cases := []struct {
		op, body, code, msgPart string
	}{
		{"Nope", `{}`, "UnknownOperationException", "Nope"},
		{"ListStreams", `{"Limit":0}`, "ValidationException", "Member must have value greater than or equal to 1"},
		{"ListStreams", `{"TableName":"a"}`, "ValidationException", "tableName"},
		{"ListStreams", `{"TableName":"bad name!"}`, "ValidationException", "regular expression"},
		{"ListStreams", `{"Limit":"x"}`, "SerializationException", "Limit"},
		{"ListStreams", `{`, "SerializationException", ""},
		{"ListStreams", `[]`, "SerializationException", ""},
		{"ListStreams", ``, "", ""},
		{"ListStreams", `{"ExclusiveStartStreamArn":"` + missingARN + `"}`, "ResourceNotFoundException", ""},
		{"ListStreams", `{"ExclusiveStartStreamArn":"` + strings.Repeat("x", 40) + `"}`, "ValidationException", "Invalid StreamArn"},
		{"ListStreams", `{"Limit":101}`, "ValidationException", "Member must have value less than or equal to 100"},
		{"ListStreams", `{"TableName":"a;"}`, "ValidationException", "2 validation errors detected: Value 'a;' at 'tableName' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"DescribeStream", `{}`, "ValidationException", "Value null at 'streamArn'"},
		{"DescribeStream", `{"StreamArn":"short"}`, "ValidationException", "length greater than or equal to 37"},
		{"DescribeStream", `{"StreamArn":"` + strings.Repeat("x", 40) + `"}`, "ValidationException", "Invalid StreamArn"},
		{"DescribeStream", `{"StreamArn":"` + missingARN + `"}`, "ResourceNotFoundException", "not found"},
		{"DescribeStream", `{"StreamArn":"` + arn + `","ShardFilter":{"Type":"PARENT","ShardId":"` + shard + `"}}`, "ValidationException", "CHILD_SHARDS"},
		{"DescribeStream", `{"StreamArn":"` + arn + `","ShardFilter":{"Type":"CHILD_SHARDS"}}`, "ValidationException", "ShardId"},
		{"DescribeStream", `{"StreamArn":"` + arn + `","ExclusiveStartShardId":"shardId-00000000000000000000-ffffffff"}`, "", ""},
		{"DescribeStream", `{"StreamArn":"` + arn + `","Limit":0}`, "ValidationException", "limit"},
		{"DescribeStream", `{"StreamArn":"` + arn + `","Limit":100}`, "", ""},
		{"DescribeStream", `{"StreamArn":"` + arn + `","Limit":101}`, "ValidationException", "Member must have value less than or equal to 100"},
		{"GetShardIterator", `{}`, "ValidationException", "3 validation errors detected"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"AT_TIMESTAMP"}`, "ValidationException", "Timestamp is required"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"SOMETIME"}`, "ValidationException", "enum value set"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"LATEST","Timestamp":1}`, "ValidationException", "Timestamp must not be set"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"AT_TIMESTAMP","Timestamp":1e300}`, "", ""},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"AT_TIMESTAMP","Timestamp":-1e300}`, "", ""},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"AT_SEQUENCE_NUMBER"}`, "ValidationException", "SequenceNumber is required"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"AT_SEQUENCE_NUMBER","SequenceNumber":"12345"}`, "ValidationException", "sequenceNumber"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"AT_SEQUENCE_NUMBER","SequenceNumber":"1234567890123456789012x"}`, "ValidationException", "Invalid SequenceNumber"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"AT_SEQUENCE_NUMBER","SequenceNumber":"999999999999999999999999"}`, "ValidationException", "outside the range"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"` + shard + `","ShardIteratorType":"TRIM_HORIZON","SequenceNumber":"100000000000000000001"}`, "ValidationException", "must not be set"},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"shardId-00000000000000000000-ffffffff","ShardIteratorType":"LATEST"}`, "ResourceNotFoundException", ""},
		{"GetShardIterator", `{"StreamArn":"` + missingARN + `","ShardId":"` + shard + `","ShardIteratorType":"LATEST"}`, "ResourceNotFoundException", ""},
		{"GetShardIterator", `{"StreamArn":"` + arn + `","ShardId":"short","ShardIteratorType":"LATEST"}`, "ValidationException", "shardId"},
		{"GetRecords", `{}`, "ValidationException", "shardIterator"},
		{"GetRecords", `{"ShardIterator":""}`, "ValidationException", "length greater than or equal to 1"},
		{"GetRecords", `{"ShardIterator":"garbage"}`, "ValidationException", "Invalid ShardIterator"},
		{"GetRecords", `{"ShardIterator":"` + tamper(good) + `"}`, "ValidationException", "Invalid ShardIterator"},
		{"GetRecords", `{"ShardIterator":"` + strings.Replace(good, "/t/", "/u/", 1) + `"}`, "ValidationException", "Invalid ShardIterator"},
		{"GetRecords", `{"ShardIterator":"` + good + `"}`, "", ""},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d-%s", i, tc.op), func(t *testing.T) {
			_, err := e.reg.Handle(bg, "", tc.op, []byte(tc.body))
			if errCode(err) != tc.code {
				t.Fatalf("%s %s: %v, want %q", tc.op, tc.body, err, tc.code)
			}
			if err != nil && !strings.Contains(err.Error(), tc.msgPart) {
				t.Fatalf("message %q lacks %q", err.Error(), tc.msgPart)
			}
		})
	}
}

// TestConcurrentAppendAndRead appends from many goroutines while readers
// poll, with rollovers in between, then checks every key's records are
// complete and in order. Run with -race.
func TestConcurrentAppendAndRead(t *testing.T) {
	e := newEnv(t, Options{Shards: 4, RolloverRecords: 300, Rollover: time.Second})
	s := e.reg.Create("", "t", NewImage)
	const writers, perWriter = 8, 400
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, sh := range s.Shards() {
					resp, err := e.reg.Handle(bg, "", "GetShardIterator", []byte(fmt.Sprintf(`{"StreamArn":%q,"ShardId":%q,"ShardIteratorType":"TRIM_HORIZON"}`, s.ARN(), sh.ID)))
					if err != nil {
						continue // the shard may have been trimmed away
					}
					it := resp.(*getShardIteratorOut).ShardIterator
					if _, err := e.reg.Handle(bg, "", "GetRecords", []byte(fmt.Sprintf(`{"ShardIterator":%q,"Limit":50}`, it))); err != nil {
						t.Errorf("GetRecords: %v", err)
						return
					}
				}
			}
		}()
	}
	readers.Add(1)
	go func() { // the engine's background loop
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			e.clk.Advance(time.Millisecond)
			e.reg.Tick()
		}
	}()
	want := map[string][]string{}
	var mu sync.Mutex
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				k := fmt.Sprintf("w%d-k%d", w, i%5)
				v := strconv.Itoa(i)
				s.Append(Change{EventName: "MODIFY", Keys: key(k), New: attr.Item{"pk": attr.Str(k), "v": attr.MustNum(v)}})
				mu.Lock()
				want[k] = append(want[k], v)
				mu.Unlock()
				if w == 0 && i%100 == 0 {
					_ = e.reg.Rollover(s.ARN())
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	got, _ := walkLineage(t, e, s.ARN())
	total := 0
	for k, w := range want {
		total += len(got[k])
		if strings.Join(got[k], ",") != strings.Join(w, ",") {
			t.Errorf("key %s: read %d records out of order or missing", k, len(got[k]))
		}
	}
	if total != writers*perWriter {
		t.Fatalf("read %d records, want %d", total, writers*perWriter)
	}
}

func FuzzHandle(f *testing.F) {
	reg := NewRegistry(Options{Shards: 2, Now: newClock().Now})
	s := reg.Create("", "fuzz", NewAndOldImages)
	s.Append(Change{EventName: "INSERT", Keys: key("a"), New: key("a")})
	shard := s.Shards()[0].ID
	resp, err := reg.Handle(bg, "", "GetShardIterator", []byte(fmt.Sprintf(`{"StreamArn":%q,"ShardId":%q,"ShardIteratorType":"TRIM_HORIZON"}`, s.ARN(), shard)))
	if err != nil {
		f.Fatal(err)
	}
	it := resp.(*getShardIteratorOut).ShardIterator
	f.Add("GetRecords", fmt.Sprintf(`{"ShardIterator":%q,"Limit":5}`, it))
	f.Add("GetRecords", fmt.Sprintf(`{"ShardIterator":%q}`, it[:len(it)-3]+"|1|"))
	f.Add("GetShardIterator", fmt.Sprintf(`{"StreamArn":%q,"ShardId":%q,"ShardIteratorType":"AT_SEQUENCE_NUMBER","SequenceNumber":"100000000000000000001"}`, s.ARN(), shard))
	f.Add("DescribeStream", fmt.Sprintf(`{"StreamArn":%q,"Limit":1,"ShardFilter":{"Type":"CHILD_SHARDS","ShardId":%q}}`, s.ARN(), shard))
	f.Add("ListStreams", `{"TableName":"fuzz","Limit":1}`)
	f.Add("ListStreams", `{"Limit":1e99}`)
	f.Add("", `null`)
	f.Fuzz(func(t *testing.T, op, body string) {
		out, err := reg.Handle(bg, "", op, []byte(body))
		if err != nil {
			if errCode(err) == "" || strings.HasPrefix(errCode(err), "non-AWS") {
				t.Fatalf("%s %q: error %v is not an *awserr.Error", op, body, err)
			}
			return
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("%s %q: response does not encode: %v", op, body, err)
		}
	})
}

// TestRetentionTrimsUnderAReader: a reader that falls behind by more than
// the retention gets TrimmedDataAccessException from its next GetRecords.
func TestRetentionTrimsUnderAReader(t *testing.T) {
	e := newEnv(t, Options{Retention: 10 * time.Minute})
	s := e.reg.Create("", "t", KeysOnly)
	s.Append(Change{EventName: "INSERT", Keys: key("a")})
	e.clk.Advance(time.Minute)
	s.Append(Change{EventName: "INSERT", Keys: key("b")})
	shard := s.Shards()[0].ID
	out, err := e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{
		ShardIterator: aws.String(getIter(t, e, s.ARN(), shard, "TRIM_HORIZON", "")), Limit: aws.Int32(1)})
	if err != nil || len(out.Records) != 1 {
		t.Fatalf("first read: %v", err)
	}
	e.clk.Advance(10*time.Minute + time.Second) // "b" is now older than the retention
	_, err = e.client.GetRecords(bg, &dynamodbstreams.GetRecordsInput{ShardIterator: out.NextShardIterator})
	if errCode(err) != "TrimmedDataAccessException" {
		t.Fatalf("reader behind the trim horizon: %v", err)
	}
	// Starting over from TRIM_HORIZON works and finds nothing.
	if got := e.readShard(t, s.ARN(), shard, 0); len(got) != 0 {
		t.Fatalf("read %d records after retention", len(got))
	}
}

// TestUnusualEventName keeps an event name the engine never sends verbatim
// rather than dropping or rewriting the record.
func TestUnusualEventName(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", KeysOnly)
	s.Append(Change{EventName: "REMOVE", Keys: key("a")})
	s.Append(Change{EventName: "CUSTOM", Keys: key("a")})
	recs := e.readShard(t, s.ARN(), s.Shards()[0].ID, 0)
	if len(recs) != 2 || recs[0].EventName != "REMOVE" || recs[1].EventName != "CUSTOM" {
		t.Fatalf("records %+v", recs)
	}
}

// TestRenderedJSONIsValid renders records with awkward strings everywhere
// the stream writes them itself; the HTTP layer sends MarshalJSON's output
// without re-validating it.
func TestRenderedJSONIsValid(t *testing.T) {
	e := newEnv(t, Options{Region: "us-\x00east-\"1\\"})
	s := e.reg.Create("", "t", NewAndOldImages)
	img := attr.Item{"pk": attr.Str("a\x01\"\\\u2028é"), "b": attr.Bin([]byte{0, 1, 2}), "l": attr.List(attr.Null(), attr.Bool(false)), "m": attr.Map(attr.Item{"x\ty": attr.NumSet("1", "2")})}
	s.Append(Change{EventName: "MOD\x02IFY\"", Keys: attr.Item{"pk": img["pk"]}, Old: img, New: img, Service: true})
	body, _ := json.Marshal(map[string]string{"ShardIterator": getIter(t, e, s.ARN(), s.Shards()[0].ID, "TRIM_HORIZON", "")})
	resp, err := e.reg.Handle(bg, "", "GetRecords", body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := resp.(*getRecordsOut).MarshalJSON()
	if err != nil || !json.Valid(b) {
		t.Fatalf("invalid JSON (%v): %s", err, b)
	}
}

func TestAtTimestampIterator(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "t", NewImage)
	start := e.clk.Now()
	for i := 1; i <= 4; i++ {
		s.Append(Change{EventName: "INSERT", Keys: key("k"), New: attr.Item{"pk": attr.Str("k"), "v": attr.MustNum(strconv.Itoa(i))}})
		e.clk.Advance(time.Minute)
	}
	shard := s.Shards()[0].ID
	cases := []struct {
		at   time.Time
		want string
	}{
		{start.Add(-time.Hour), "1,2,3,4"},
		{start, "1,2,3,4"},
		{start.Add(90 * time.Second), "3,4"},
		{start.Add(3 * time.Minute), "4"},
		{start.Add(time.Hour), ""},
	}
	for _, tc := range cases {
		out, err := e.client.GetShardIterator(bg, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.ARN()), ShardId: aws.String(shard),
			ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(tc.at)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range e.drain(t, out.ShardIterator, 0) {
			got = append(got, r.Dynamodb.NewImage["v"].(*types.AttributeValueMemberN).Value)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("AT_TIMESTAMP %v read %v, want %s", tc.at, got, tc.want)
		}
	}
}

// TestAppendEncoded: the pre-encoded path lands a key in the same shard and
// renders the same record as Append.
func TestAppendEncoded(t *testing.T) {
	e := newEnv(t, Options{Shards: 8})
	s := e.reg.Create("", "t", OldImage)
	old := attr.Item{"pk": attr.Str("x"), "exp": attr.MustNum("1700000000")}
	for i := 0; i < 20; i++ {
		k := attr.Item{"pk": attr.Str(fmt.Sprint("key", i))}
		s.Append(Change{EventName: "REMOVE", Keys: k, Old: old, Service: true})
		err := s.AppendEncoded(EncodedChange{EventName: "REMOVE", Keys: attr.AppendItemJSON(nil, k), Old: attr.AppendItemJSON(nil, old),
			New: []byte("not used by OLD_IMAGE"), Size: attr.ItemSize(k) + attr.ItemSize(old), Service: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, sh := range s.Shards() {
		recs := e.readShard(t, s.ARN(), sh.ID, 0)
		if len(recs)%2 != 0 {
			t.Fatalf("shard %s holds %d records: a key's two records were split", sh.ID, len(recs))
		}
		for i := 0; i+1 < len(recs); i += 2 {
			a, b := recs[i], recs[i+1]
			if aws.ToInt64(a.Dynamodb.SizeBytes) != aws.ToInt64(b.Dynamodb.SizeBytes) || len(b.Dynamodb.OldImage) != 2 || b.Dynamodb.NewImage != nil ||
				b.UserIdentity == nil || a.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS).Value != b.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS).Value {
				t.Fatalf("records differ: %+v / %+v", a.Dynamodb, b.Dynamodb)
			}
		}
		n += len(recs)
	}
	if n != 40 {
		t.Fatalf("%d records", n)
	}
	for _, bad := range []EncodedChange{
		{EventName: "REMOVE"},
		{EventName: "REMOVE", Keys: []byte(`{"pk":`)},
		{EventName: "REMOVE", Keys: []byte(`[]`)},
		{EventName: "REMOVE", Keys: []byte(`{}`), Old: []byte(`{`)},
	} {
		if err := s.AppendEncoded(bad); err == nil {
			t.Errorf("AppendEncoded(%q, %q) accepted", bad.Keys, bad.Old)
		}
	}
}

// TestValidStreamARN holds the stream ARN check to AWS's form, the table
// name's 255 bytes included (checked apart from the pattern).
func TestValidStreamARN(t *testing.T) {
	arn := func(table string) string {
		return "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-12-02T15:04:05.000"
	}
	for _, tc := range []struct {
		arn  string
		want bool
	}{
		{arn("t"), true},
		{arn(strings.Repeat("a", 255)), true},
		{arn(strings.Repeat("a", 256)), false},
		{arn(""), false},
		{arn("a/b"), false},
		{"arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/2026-12-02", false},
	} {
		if got := validStreamARN(tc.arn); got != tc.want {
			t.Errorf("validStreamARN(%.80s...) = %v, want %v", tc.arn, got, tc.want)
		}
	}
}

// tamper returns it with its fifth character from the end changed (a
// character that carries six whole bits of its signature): replacing the
// last two with "AA" left it unchanged whenever it already ended so.
func tamper(it string) string {
	i := len(it) - 5
	c := byte('A')
	if it[i] == c {
		c = 'B'
	}
	return it[:i] + string(c) + it[i+1:]
}
