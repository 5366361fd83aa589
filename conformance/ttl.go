package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expiredAgo is how far in the past the checks put the TTL of an item
// that is to expire: well past on any clock a little off the endpoint's.
const expiredAgo = time.Minute

// year is 365 days: the five-year rule's items sit a year beyond it, or
// a year inside it, so leap days do not matter.
const year = 365 * 24 * time.Hour

// awaitExpiry waits up to the bound for TTL to delete the item id of
// table, which had expired when it was written, and returns how long
// after the write it went. When it stays, the outcome says so, and the
// checks after this one fail at once instead of waiting the bound again:
// the endpoint's TTL deleted nothing within it.
func (e *Env) awaitExpiry(ctx context.Context, db *dynamodb.Client, table, id string) (time.Duration, *Outcome) {
	if e.run.noTTL != "" {
		o := failf("%s", e.run.noTTL)
		return 0, &o
	}
	d, err := e.waitFor(ctx, e.Bound, true, func(ctx context.Context) error {
		it, err := get(ctx, db, table, id)
		if err == nil && it != nil {
			return errNotYet
		}
		return err
	})
	switch {
	case errors.Is(err, errNotYet):
		e.run.noTTL = fmt.Sprintf("TTL deleted nothing within the bound (%v): an item whose Number TTL was %v in the past when written was still there (seen first in %s)",
			e.Bound, expiredAgo, e.check)
		o := failf("%s", e.run.noTTL)
		return d, &o
	case err != nil:
		o := failed("waiting for the TTL deletion", err)
		return d, &o
	}
	return d, nil
}

// watchFor is how long the checks watch items that must stay after an
// item expired beside them was deleted after delay: twice that, at least a
// second, at most the bound. A sweeper that took delay to reach one item
// has been over the whole table again by then.
func (e *Env) watchFor(delay time.Duration) time.Duration {
	return min(max(2*delay, time.Second), e.Bound)
}

// deletedWithin watches the items ids of table for watch and returns
// those that were deleted.
func (e *Env) deletedWithin(ctx context.Context, db *dynamodb.Client, table string, ids []string, watch time.Duration) ([]string, error) {
	var gone []string
	_, err := e.waitFor(ctx, watch, true, func(ctx context.Context) error {
		for _, id := range ids {
			it, err := get(ctx, db, table, id)
			if err != nil {
				return err
			}
			if it == nil && !slices.Contains(gone, id) {
				gone = append(gone, id)
			}
		}
		if len(gone) == len(ids) {
			return nil
		}
		return errNotYet
	})
	if errors.Is(err, errNotYet) {
		err = nil
	}
	return gone, err
}

// ttlBeside writes subjects (items the endpoint must not delete) into a
// new TTL table beside a control item that expired a minute ago, waits for
// TTL to delete the control, then watches the subjects (watchFor). It
// returns the table, the subjects deleted and the control's delay, or the
// outcome when the control stayed or a call failed.
func (e *Env) ttlBeside(ctx context.Context, subjects []item) (table string, deleted []string, delay time.Duration, o *Outcome) {
	fail := func(out Outcome) (string, []string, time.Duration, *Outcome) { return table, nil, delay, &out }
	table, _, err := e.table(ctx, e.DynamoDB, tableSpec{ttl: true})
	if err != nil {
		return fail(failed("creating the table", err))
	}
	now, err := e.now(ctx)
	if err != nil {
		return fail(failed("reading the engine's clock", err))
	}
	var ids []string
	for _, it := range subjects {
		if err := put(ctx, e.DynamoDB, table, it); err != nil {
			return fail(failed("writing an item TTL must keep", err))
		}
		ids = append(ids, describeKey(it))
	}
	if err := put(ctx, e.DynamoDB, table, expiring("control", now.Add(-expiredAgo).Unix())); err != nil {
		return fail(failed("writing the control item", err))
	}
	delay, bad := e.awaitExpiry(ctx, e.DynamoDB, table, "control")
	if bad != nil {
		return fail(failf("%s; so nothing can be said of the items it must keep", bad.Detail))
	}
	deleted, err = e.deletedWithin(ctx, e.DynamoDB, table, ids, e.watchFor(delay))
	if err != nil {
		return fail(failed("watching the items TTL must keep", err))
	}
	return table, deleted, delay, nil
}

// ttlChecks are the checks of TTL's deletions.
func ttlChecks() []Check {
	return []Check{
		{Name: "ttl-expiry", Run: checkExpiry,
			Asserts: "an item whose Number TTL has passed is deleted within the bound; an item whose TTL is ahead is kept"},
		{Name: "ttl-five-years", Run: checkFiveYears,
			Asserts: "an item whose TTL is more than five years in the past is never deleted; one four years past is"},
		{Name: "ttl-number-only", Run: checkNumberOnly,
			Asserts: "only a Number of epoch seconds expires an item: a String holding a past epoch is ignored, and a Number in epoch milliseconds lies far ahead"},
		{Name: "ttl-other-types", Run: checkOtherTypes,
			Asserts: "a TTL attribute of any other type (Binary, Boolean, Null, sets, List, Map) is written and ignored: the item is kept"},
	}
}

func checkExpiry(ctx context.Context, e *Env) Outcome {
	table, _, err := e.table(ctx, e.DynamoDB, tableSpec{ttl: true})
	if err != nil {
		return failed("creating the table", err)
	}
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	if err := put(ctx, e.DynamoDB, table, expiring("ahead", now.Add(24*time.Hour).Unix())); err != nil {
		return failed("writing", err)
	}
	if err := put(ctx, e.DynamoDB, table, expiring("expired", now.Add(-expiredAgo).Unix())); err != nil {
		return failed("writing", err)
	}
	delay, bad := e.awaitExpiry(ctx, e.DynamoDB, table, "expired")
	if bad != nil {
		return *bad
	}
	deleted, err := e.deletedWithin(ctx, e.DynamoDB, table, []string{"ahead"}, e.watchFor(delay))
	if err != nil {
		return failed("watching the unexpired item", err)
	}
	if len(deleted) > 0 {
		return failf("the expired item was deleted, but so was an item whose TTL is a day ahead")
	}
	return Outcome{Status: Pass, Delay: delay,
		Detail: fmt.Sprintf("the expired item deleted (delay counted from its write; its TTL %v before); an item whose TTL is a day ahead kept", expiredAgo)}
}

func checkFiveYears(ctx context.Context, e *Env) Outcome {
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	table, deleted, delay, bad := e.ttlBeside(ctx, []item{expiring("six-years", now.Add(-6*year).Unix())})
	if bad != nil {
		return *bad
	}
	if len(deleted) > 0 {
		return failf("an item whose TTL is six years in the past was deleted (DynamoDB ignores TTLs more than five years old)")
	}
	if err := put(ctx, e.DynamoDB, table, expiring("four-years", now.Add(-4*year).Unix())); err != nil {
		return failed("writing", err)
	}
	gone, err := e.deletedWithin(ctx, e.DynamoDB, table, []string{"four-years"}, e.Bound)
	if err != nil {
		return failed("waiting for the four-year-old expiry", err)
	}
	if len(gone) == 0 {
		return failf("an item whose TTL is four years in the past was not deleted within the bound (%v): the five-year rule is applied too early", e.Bound)
	}
	return Outcome{Status: Pass, Delay: delay,
		Detail: fmt.Sprintf("a six-year-old TTL kept for %s after a recent expiry was deleted; a four-year-old one deleted", round(e.watchFor(delay)))}
}

func checkNumberOnly(ctx context.Context, e *Env) Outcome {
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	past := now.Add(-expiredAgo).Unix()
	subjects := []item{
		{"pk": str("string"), "sk": str("0"), ttlAttr: str(fmt.Sprint(past))},
		{"pk": str("milliseconds"), "sk": str("0"), ttlAttr: num(past * 1000)},
	}
	_, deleted, delay, bad := e.ttlBeside(ctx, subjects)
	if bad != nil {
		return *bad
	}
	if len(deleted) > 0 {
		return failf("deleted beside the Number TTL in epoch seconds: %s (a String is not a TTL; a Number in milliseconds is tens of thousands of years ahead)",
			strings.Join(deleted, ", "))
	}
	return Outcome{Status: Pass, Delay: delay, Detail: fmt.Sprintf("a String epoch and a Number in milliseconds kept for %s after the Number in seconds was deleted",
		round(e.watchFor(delay)))}
}

func checkOtherTypes(ctx context.Context, e *Env) Outcome {
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	past := now.Add(-expiredAgo).Unix()
	values := map[string]types.AttributeValue{
		"binary":     &types.AttributeValueMemberB{Value: []byte(fmt.Sprint(past))},
		"boolean":    &types.AttributeValueMemberBOOL{Value: true},
		"null":       &types.AttributeValueMemberNULL{Value: true},
		"string-set": &types.AttributeValueMemberSS{Value: []string{fmt.Sprint(past)}},
		"number-set": &types.AttributeValueMemberNS{Value: []string{fmt.Sprint(past)}},
		"binary-set": &types.AttributeValueMemberBS{Value: [][]byte{[]byte("x")}},
		"list":       &types.AttributeValueMemberL{Value: []types.AttributeValue{num(past)}},
		"map":        &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{ttlAttr: num(past)}},
	}
	var subjects []item
	for _, id := range slices.Sorted(maps.Keys(values)) {
		subjects = append(subjects, item{"pk": str(id), "sk": str("0"), ttlAttr: values[id]})
	}
	_, deleted, delay, bad := e.ttlBeside(ctx, subjects)
	if bad != nil {
		return *bad
	}
	if len(deleted) > 0 {
		return failf("deleted, though the TTL attribute is not a Number: %s", strings.Join(deleted, ", "))
	}
	return Outcome{Status: Pass, Delay: delay, Detail: fmt.Sprintf("%d items whose TTL attribute is another type, each holding a past epoch where it can, kept for %s",
		len(subjects), round(e.watchFor(delay)))}
}
