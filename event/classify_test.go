package event

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event/eventtest"
)

// ident and rec are eventtest's Ident and Record (region_test.go uses
// them too).
func ident(typ, principal string) *types.Identity { return eventtest.Ident(typ, principal) }

func rec(name types.OperationType, id *types.Identity, seq string) types.Record {
	return eventtest.Record(name, id, seq)
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name    string
		op      types.OperationType
		id      *types.Identity
		want    Kind
		wantErr string
	}{
		{"ttl expiry", types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), Expired, ""},
		{"user delete", types.OperationTypeRemove, nil, Deleted, ""},
		{"other service", types.OperationTypeRemove, ident("Service", "lambda.amazonaws.com"), Deleted, ""},
		{"wrong type", types.OperationTypeRemove, ident("User", "dynamodb.amazonaws.com"), Deleted, ""},
		{"empty identity", types.OperationTypeRemove, &types.Identity{}, Deleted, ""},
		{"type only", types.OperationTypeRemove, &types.Identity{Type: aws.String("Service")}, Deleted, ""},
		{"insert", types.OperationTypeInsert, nil, Inserted, ""},
		{"insert by service", types.OperationTypeInsert, ident("Service", "dynamodb.amazonaws.com"), Inserted, ""},
		{"modify", types.OperationTypeModify, nil, Modified, ""},
		{"missing name", "", nil, "", "missing"},
		{"unknown name", "TRUNCATE", nil, "", "unknown event name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Classify(types.Record{EventName: c.op, UserIdentity: c.id})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Classify error = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Classify = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestDecodeExpired(t *testing.T) {
	r := rec(types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), "000123")
	e, err := Decode("tbl", "arn:s", "shard-1", r, "expires")
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != Expired || e.Table != "tbl" || e.StreamARN != "arn:s" || e.ShardID != "shard-1" ||
		e.SequenceNumber != "000123" || e.EventID != "ev-000123" || e.EventName != "REMOVE" || e.SizeBytes != 42 {
		t.Fatalf("decoded %+v", e)
	}
	if !e.ApproximateCreationTime.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("creation time %v", e.ApproximateCreationTime)
	}
	if e.TTLAttribute != "expires" || e.TTLValue != "1767322800" {
		t.Errorf("TTL attribute/value %q/%q", e.TTLAttribute, e.TTLValue)
	}
	if !e.TTLTime.Equal(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)) || e.TTLLag != 4*time.Minute+5*time.Second {
		t.Errorf("TTL time %v lag %v", e.TTLTime, e.TTLLag)
	}
	// Lossless images: the very same attribute values.
	if e.OldImage["blob"].(*types.AttributeValueMemberB).Value[2] != 2 ||
		e.OldImage["set"].(*types.AttributeValueMemberNS).Value[1] != "2.50" ||
		e.Keys["pk"].(*types.AttributeValueMemberS).Value != "k1" {
		t.Errorf("images changed: %+v", e.OldImage)
	}
}

func TestDecodeTTLCases(t *testing.T) {
	cases := []struct {
		name      string
		attr      string
		mutate    func(*types.Record)
		wantValue string
		wantTime  bool
	}{
		{"known", "expires", nil, "1767322800", true},
		{"attribute unknown", "", nil, "", false},
		{"keys only", "expires", func(r *types.Record) { r.Dynamodb.OldImage = nil }, "", false},
		{"attribute not a number", "expires", func(r *types.Record) {
			r.Dynamodb.OldImage["expires"] = &types.AttributeValueMemberS{Value: "1767322800"}
		}, "", false},
		{"fraction", "expires", func(r *types.Record) {
			r.Dynamodb.OldImage["expires"] = &types.AttributeValueMemberN{Value: "1767322800.5"}
		}, "1767322800.5", true},
		{"exponent", "expires", func(r *types.Record) {
			r.Dynamodb.OldImage["expires"] = &types.AttributeValueMemberN{Value: "1.7673228E9"}
		}, "1.7673228E9", true},
		{"huge", "expires", func(r *types.Record) {
			r.Dynamodb.OldImage["expires"] = &types.AttributeValueMemberN{Value: "1E+100"}
		}, "1E+100", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rec(types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), "1")
			if c.mutate != nil {
				c.mutate(&r)
			}
			e, err := Decode("tbl", "arn", "s", r, c.attr)
			if err != nil {
				t.Fatal(err)
			}
			if e.TTLValue != c.wantValue || e.TTLTime.IsZero() == c.wantTime || (e.TTLLag == 0) == c.wantTime {
				t.Errorf("TTLValue %q TTLTime %v TTLLag %v", e.TTLValue, e.TTLTime, e.TTLLag)
			}
		})
	}
	// A user delete never gets TTL fields.
	e, err := Decode("tbl", "arn", "s", rec(types.OperationTypeRemove, nil, "1"), "expires")
	if err != nil || e.Kind != Deleted || e.TTLValue != "" || e.TTLAttribute != "" {
		t.Errorf("user delete decoded as %+v, %v", e, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*types.Record)
		field  string
	}{
		{"no dynamodb", func(r *types.Record) { r.Dynamodb = nil }, "dynamodb"},
		{"no sequence", func(r *types.Record) { r.Dynamodb.SequenceNumber = nil }, "dynamodb.SequenceNumber"},
		{"bad sequence", func(r *types.Record) { r.Dynamodb.SequenceNumber = aws.String("12a") }, "dynamodb.SequenceNumber"},
		{"bad event name", func(r *types.Record) { r.EventName = "DROP" }, "eventName"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rec(types.OperationTypeInsert, nil, "1")
			c.mutate(&r)
			_, err := Decode("tbl", "arn", "shard-9", r, "")
			var re *RecordError
			if !errors.As(err, &re) || re.Field != c.field || !strings.Contains(err.Error(), "shard-9") {
				t.Fatalf("error %v, want a RecordError on %s", err, c.field)
			}
		})
	}
}

func TestParseEpochSeconds(t *testing.T) {
	cases := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"0", time.Unix(0, 0), true},
		{"1700000000", time.Unix(1700000000, 0), true},
		{"1700000000.123456789", time.Unix(1700000000, 123456789), true},
		{"1700000000.1234567899", time.Unix(1700000000, 123456789), true},
		{"1.7e9", time.Unix(1700000000, 0), true},
		{"17E8", time.Unix(1700000000, 0), true},
		{"1.7e+9", time.Unix(1700000000, 0), true},
		{"+1700000000", time.Unix(1700000000, 0), true},
		{"170000000000e-2", time.Unix(1700000000, 0), true},
		{"253402300799", time.Unix(253402300799, 0), true},
		{"253402300800", time.Time{}, false},
		{"-1", time.Time{}, false},
		{"-0.5", time.Time{}, false},
		{"", time.Time{}, false},
		{"abc", time.Time{}, false},
		{"Inf", time.Time{}, false},
		{"NaN", time.Time{}, false},
		{"0x10", time.Time{}, false},
		{"1_000", time.Time{}, false},
		{"1e400", time.Time{}, false},
	}
	for _, c := range cases {
		got, ok := ParseEpochSeconds(c.in)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("ParseEpochSeconds(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseEpochSeconds(f *testing.F) {
	for _, s := range []string{"1700000000", "1.5e9", "1e-130", "99999999999999999999999999999999999999", "-0", ".5", "5."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, ok := ParseEpochSeconds(s)
		if ok && (tm.Unix() < 0 || tm.Unix() > maxEpochSeconds) {
			t.Fatalf("%q parsed to out-of-range %v", s, tm)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add("REMOVE", "Service", "dynamodb.amazonaws.com", "123", "1700000000")
	f.Add("INSERT", "", "", "", "x")
	f.Add("MODIFY", "User", "me", "0001", "1e9")
	f.Fuzz(func(t *testing.T, name, typ, principal, seq, ttl string) {
		r := types.Record{
			EventName:    types.OperationType(name),
			UserIdentity: ident(typ, principal),
			Dynamodb: &types.StreamRecord{
				SequenceNumber: aws.String(seq),
				OldImage:       map[string]types.AttributeValue{"ttl": &types.AttributeValueMemberN{Value: ttl}},
			},
		}
		e, err := Decode("t", "a", "s", r, "ttl")
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if !e.Kind.Valid() || e.SequenceNumber != seq {
			t.Fatalf("decoded %+v", e)
		}
	})
}

// TestClassifyWith: each case of the classification table
// (eventtest.ClassifyCases) has its kind under service and under past-ttl.
func TestClassifyWith(t *testing.T) {
	for _, c := range eventtest.ClassifyCases() {
		t.Run(c.Name, func(t *testing.T) {
			r := c.Record("1")
			for _, when := range []ExpiredWhen{ExpiredWhenService, ExpiredWhenPastTTL} {
				got, err := ClassifyWith(r, when, c.Attr)
				if want := Kind(c.Want(when == ExpiredWhenPastTTL)); err != nil || got != want {
					t.Errorf("%v: ClassifyWith = %q, %v; want %q", when, got, err, want)
				}
			}
			if got, _ := Classify(r); got != Kind(c.Service) {
				t.Errorf("Classify = %q, want %q (service)", got, c.Service)
			}
		})
	}
	if _, err := ClassifyWith(types.Record{EventName: "TRUNCATE"}, ExpiredWhenPastTTL, "expires"); err == nil {
		t.Error("ClassifyWith accepted an unknown event name")
	}
}

// TestDecodeDeletedBy: every REMOVE says who made it; a past-ttl expiry
// gets its TTL values as a service expiry does.
func TestDecodeDeletedBy(t *testing.T) {
	cases := []struct {
		name      string
		op        types.OperationType
		id        *types.Identity
		when      ExpiredWhen
		kind      Kind
		deletedBy string
		ttl       bool
	}{
		{"service expiry", types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), ExpiredWhenService, Expired, DeletedByTTL, true},
		{"service expiry under past-ttl", types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), ExpiredWhenPastTTL, Expired, DeletedByTTL, true},
		{"swept under service", types.OperationTypeRemove, nil, ExpiredWhenService, Deleted, DeletedByOther, false},
		{"swept under past-ttl", types.OperationTypeRemove, nil, ExpiredWhenPastTTL, Expired, DeletedByOther, true},
		{"other principal", types.OperationTypeRemove, ident("Service", "lambda.amazonaws.com"), ExpiredWhenPastTTL, Expired, DeletedByOther, true},
		{"insert", types.OperationTypeInsert, nil, ExpiredWhenPastTTL, Inserted, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := DecodeWith("tbl", "arn", "s", 0, rec(c.op, c.id, "1"), "expires", c.when)
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind != c.kind || e.DeletedBy != c.deletedBy {
				t.Fatalf("kind %q deletedBy %q, want %q %q", e.Kind, e.DeletedBy, c.kind, c.deletedBy)
			}
			wantLag := time.Duration(0)
			if c.ttl {
				wantLag = 245 * time.Second
			}
			if (e.TTLValue != "") != c.ttl || e.TTLLag != wantLag || e.TTLTime.IsZero() == c.ttl {
				t.Errorf("TTL value %q time %v lag %v", e.TTLValue, e.TTLTime, e.TTLLag)
			}
		})
	}
}

func TestParseExpiredWhen(t *testing.T) {
	for s, want := range map[string]ExpiredWhen{"service": ExpiredWhenService, "past-ttl": ExpiredWhenPastTTL} {
		got, err := ParseExpiredWhen(s)
		if err != nil || got != want || got.String() != s {
			t.Errorf("ParseExpiredWhen(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "Service", "past_ttl", "ttl"} {
		if _, err := ParseExpiredWhen(s); err == nil || !strings.Contains(err.Error(), "service or past-ttl") {
			t.Errorf("ParseExpiredWhen(%q): err %v", s, err)
		}
	}
	if s := ExpiredWhen(7).String(); s != "ExpiredWhen(7)" {
		t.Errorf("String of a bad value: %q", s)
	}
}
