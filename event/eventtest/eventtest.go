// Package eventtest holds the stream records the tests of event and
// consumer classify, and the one table of how each is classified: its kind
// under --expired-when service and under past-ttl (ClassifyCases). event's
// tests check ClassifyWith against the table; consumer's check that a
// batch's records reach the sinks with the same kinds.
//
// It imports nothing of this module, so event's own (internal) tests can
// use it: a kind is written as event.Kind's string ("expired").
package eventtest

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Created is the creation second of Record's records
// (2026-01-02T03:04:05Z).
const Created = 1767323045

// TTLAttribute is the TTL attribute of Record's old image.
const TTLAttribute = "expires"

// Ident is a userIdentity of the given type and principal.
func Ident(typ, principal string) *types.Identity {
	return &types.Identity{Type: aws.String(typ), PrincipalId: aws.String(principal)}
}

// TTLService is the userIdentity of DynamoDB's TTL deletes.
func TTLService() *types.Identity { return Ident("Service", "dynamodb.amazonaws.com") }

// Record is a record of the given event name, userIdentity and sequence
// number, created at Created, whose old image's "expires" is
// 2026-01-02T03:00:00Z (245 s before).
func Record(name types.OperationType, id *types.Identity, seq string) types.Record {
	t := time.Unix(Created, 0).UTC()
	return types.Record{
		EventID:      aws.String("ev-" + seq),
		EventName:    name,
		UserIdentity: id,
		Dynamodb: &types.StreamRecord{
			SequenceNumber:              aws.String(seq),
			ApproximateCreationDateTime: &t,
			SizeBytes:                   aws.Int64(42),
			Keys:                        map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k1"}},
			OldImage: map[string]types.AttributeValue{
				"pk":         &types.AttributeValueMemberS{Value: "k1"},
				TTLAttribute: &types.AttributeValueMemberN{Value: "1767322800"}, // 2026-01-02T03:00:00Z
				"blob":       &types.AttributeValueMemberB{Value: []byte{0, 1, 2}},
				"set":        &types.AttributeValueMemberNS{Value: []string{"1", "2.50"}},
			},
		},
	}
}

// WithTTL sets the "expires" attribute of a record's old image (nil:
// removes it).
func WithTTL(av types.AttributeValue) func(*types.Record) {
	return func(r *types.Record) {
		if av == nil {
			delete(r.Dynamodb.OldImage, TTLAttribute)
			return
		}
		r.Dynamodb.OldImage[TTLAttribute] = av
	}
}

// Num is a Number attribute value.
func Num(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }

// ClassifyCase is one record and its kind under each --expired-when.
type ClassifyCase struct {
	Name   string
	Op     types.OperationType
	ID     *types.Identity
	Attr   string              // the table's TTL attribute ("": unknown)
	Mutate func(*types.Record) // nil: Record as it is
	// Service and PastTTL are the record's kind (event.Kind's string)
	// under --expired-when service and under past-ttl.
	Service, PastTTL string
}

// Record is the case's record with sequence number seq.
func (c ClassifyCase) Record(seq string) types.Record {
	r := Record(c.Op, c.ID, seq)
	if c.Mutate != nil {
		c.Mutate(&r)
	}
	return r
}

// Want is the case's kind under past-ttl (pastTTL) or service.
func (c ClassifyCase) Want(pastTTL bool) string {
	if pastTTL {
		return c.PastTTL
	}
	return c.Service
}

// ClassifyCases is the classification table: which REMOVE is an expiry
// under each rule (docs/DESIGN.md, "Which REMOVE is an expiry"), at the
// edges of the past-ttl rule (the creation second, fractions, five years,
// exponents) and for records it cannot read.
func ClassifyCases() []ClassifyCase {
	const (
		remove   = types.OperationTypeRemove
		expired  = "expired"
		deleted  = "deleted"
		expires  = TTLAttribute
		inserted = "inserted"
		modified = "modified"
	)
	ttl := TTLService()
	return []ClassifyCase{
		{"service delete", remove, ttl, expires, nil, expired, expired},
		{"service delete, attribute unknown", remove, ttl, "", nil, expired, expired},
		{"sweeper delete, TTL 245 s before", remove, nil, expires, nil, deleted, expired},
		{"user delete of a live item", remove, nil, expires, WithTTL(Num("1767326400")), deleted, deleted},
		{"TTL is the creation second", remove, nil, expires, WithTTL(Num("1767323045")), deleted, expired},
		{"TTL the second after creation", remove, nil, expires, WithTTL(Num("1767323046")), deleted, deleted},
		{"TTL one second before creation", remove, nil, expires, WithTTL(Num("1767323044")), deleted, expired},
		{"fractional TTL before the creation second", remove, nil, expires, WithTTL(Num("1767323044.75")), deleted, expired},
		{"fractional TTL inside the creation second", remove, nil, expires, WithTTL(Num("1767323045.999999999")), deleted, expired},
		{"fractional TTL just after the creation second", remove, nil, expires, WithTTL(Num("1767323046.0000000001")), deleted, deleted},
		{"exponent TTL", remove, nil, expires, WithTTL(Num("1.767323e9")), deleted, expired},
		{"sub-second creation time read to the second", remove, nil, expires, func(r *types.Record) {
			r.Dynamodb.OldImage[TTLAttribute] = Num("1767323045.5")
			at := time.Unix(Created, 400_000_000).UTC()
			r.Dynamodb.ApproximateCreationDateTime = &at
		}, deleted, expired},
		{"TTL five years before", remove, nil, expires, WithTTL(Num("1609643045")), deleted, expired},
		{"TTL more than five years before", remove, nil, expires, WithTTL(Num("1609643044")), deleted, deleted},
		{"TTL zero", remove, nil, expires, WithTTL(Num("0")), deleted, deleted},
		{"missing TTL", remove, nil, expires, WithTTL(nil), deleted, deleted},
		{"TTL attribute unknown", remove, nil, "", nil, deleted, deleted},
		{"non-Number TTL", remove, nil, expires, WithTTL(&types.AttributeValueMemberS{Value: "1767322800"}), deleted, deleted},
		{"Number that is not epoch seconds", remove, nil, expires, WithTTL(Num("-1")), deleted, deleted},
		{"KEYS_ONLY", remove, nil, expires, func(r *types.Record) { r.Dynamodb.OldImage = nil }, deleted, deleted},
		{"no creation time", remove, nil, expires, func(r *types.Record) { r.Dynamodb.ApproximateCreationDateTime = nil }, deleted, deleted},
		{"no stream record", remove, nil, expires, func(r *types.Record) { r.Dynamodb = nil }, deleted, deleted},
		{"insert with a past TTL", types.OperationTypeInsert, nil, expires, nil, inserted, inserted},
		{"modify with a past TTL", types.OperationTypeModify, nil, expires, nil, modified, modified},
	}
}
