package sweep

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// seedTable is seed 003's table (shared/seeds): key itemId, TTL on ttl,
// and the recipe's index expirationWindowIndex, projecting every
// attribute.
const seedTable = "expirationTable"

// createSeedTable makes seedTable in the bed's engine: with the index's
// range key ttl as in the seed, or (hashOnly) with no range key, so that
// open windows are read through a FilterExpression.
func (b *bed) createSeedTable(hashOnly bool) {
	b.t.Helper()
	ixKey := []types.KeySchemaElement{{AttributeName: aws.String(DefaultWindowAttribute), KeyType: types.KeyTypeHash}}
	defs := []types.AttributeDefinition{{AttributeName: aws.String(DefaultWindowAttribute), AttributeType: types.ScalarAttributeTypeS}}
	if !hashOnly {
		ixKey = append(ixKey, types.KeySchemaElement{AttributeName: aws.String("ttl"), KeyType: types.KeyTypeRange})
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String("ttl"), AttributeType: types.ScalarAttributeTypeN})
	}
	enginetest.CreateTable(b.t, b.db, enginetest.Table{Name: seedTable, Hash: "itemId", NoStream: true, TTL: "ttl",
		Attributes: defs,
		Indexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(DefaultIndex), KeySchema: ixKey,
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
}

// seedItem is an item of seedTable: its TTL as written (a Number) and
// its window attribute.
type seedItem struct {
	id, ttl, window string
}

// putSeed writes items to seedTable.
func (b *bed) putSeed(items ...seedItem) {
	b.t.Helper()
	for _, it := range items {
		if _, err := b.db.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(seedTable),
			Item: map[string]types.AttributeValue{
				"itemId":               &types.AttributeValueMemberS{Value: it.id},
				"ttl":                  &types.AttributeValueMemberN{Value: it.ttl},
				DefaultWindowAttribute: &types.AttributeValueMemberS{Value: it.window},
			},
		}); err != nil {
			b.t.Fatal(err)
		}
	}
}

// seedLeft returns the itemIds left in seedTable.
func (b *bed) seedLeft() map[string]bool {
	b.t.Helper()
	left := map[string]bool{}
	in := &dynamodb.ScanInput{TableName: aws.String(seedTable), ConsistentRead: aws.Bool(true)}
	for {
		out, err := b.db.Scan(context.Background(), in)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, it := range out.Items {
			left[it["itemId"].(*types.AttributeValueMemberS).Value] = true
		}
		if len(out.LastEvaluatedKey) == 0 {
			return left
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// TestSweepLeavesWhatDynamoDBLeaves is issue 19's "done when" on seed
// 003's table: TTLs of 0, six years ago and negative (DynamoDB's TTL
// ignores TTLs more than five years old) are never deleted, whether their
// writer filed them in their own window or cancelled the expiry and kept
// the current one; they hold no window open, so the cursor moves on;
// items due in 5 s are gone by the first pass after their TTL.
func TestSweepLeavesWhatDynamoDBLeaves(t *testing.T) {
	for _, layout := range []struct {
		name     string
		hashOnly bool
	}{{"range key ttl (seed 003)", false}, {"hash-only index, filtered", true}} {
		t.Run(layout.name, func(t *testing.T) {
			b := newBed(t, bedOptions{})
			b.createSeedTable(layout.hashOnly)
			due := at(5 * time.Second)
			current := Window(due, time.Minute, 1)
			sixYearsAgo := t0.AddDate(-6, 0, 0)
			fourYearsAgo := t0.AddDate(-4, 0, 0)
			var keep, gone []seedItem
			for _, old := range []struct {
				name string
				ttl  time.Time
			}{
				{"zero", time.Unix(0, 0)},
				{"six-years-ago", sixYearsAgo},
				{"negative", time.Unix(-1, 0)},
				{"negative-fraction", time.UnixMilli(-86400500)},
				{"five-years-less-30s", t0.Add(-fiveYears + 30*time.Second)},
			} {
				ttl := epochNumber(old.ttl.UnixMilli())
				keep = append(keep,
					seedItem{"kept-window-" + old.name, ttl, current}, // the expiry cancelled, the window kept
					seedItem{"own-window-" + old.name, ttl, Window(old.ttl, time.Minute, 1)})
			}
			for i := range 20 {
				gone = append(gone, seedItem{"due-in-5s-" + strconv.Itoa(i), epochNumber(due.UnixMilli()), current})
			}
			// Due by DynamoDB's rule too: four years old, in the current window.
			gone = append(gone, seedItem{"four-years-ago", epochNumber(fourYearsAgo.UnixMilli()), current})
			b.putSeed(append(keep, gone...)...)
			// Cancelled between the Query and the DeleteItem: the condition
			// refuses it, counted as too old, and its window still closes.
			b.putSeed(seedItem{"cancelled-mid-pass", epochNumber(due.UnixMilli()), current})
			keep = append(keep, seedItem{id: "cancelled-mid-pass"})
			b.api.beforeDelete = func(in *dynamodb.DeleteItemInput) {
				if in.Key["itemId"].(*types.AttributeValueMemberS).Value != "cancelled-mid-pass" {
					return
				}
				if _, err := b.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
					TableName: aws.String(seedTable), Key: in.Key,
					UpdateExpression:          aws.String("SET #t = :zero"),
					ExpressionAttributeNames:  map[string]string{"#t": "ttl"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":zero": &types.AttributeValueMemberN{Value: "0"}},
				}); err != nil {
					t.Error(err)
				}
			}
			s := b.sweeper(func(c *Config) { c.Table = seedTable })
			var goneAt time.Time
			var st PassStats
			for step := time.Duration(0); step <= 3*time.Minute; step += time.Second {
				b.clock.Set(at(step))
				st = b.pass(s)
				left := b.seedLeft()
				for _, it := range keep {
					if !left[it.id] {
						t.Fatalf("at +%v: %s (TTL %s, window %s) was deleted; DynamoDB's TTL would not delete it", step, it.id, it.ttl, it.window)
					}
				}
				if left["four-years-ago"] {
					t.Fatalf("at +%v: four-years-ago is left; DynamoDB's TTL would delete it", step)
				}
				if step <= 5*time.Second && len(left) != len(keep)+len(gone)-1 {
					t.Fatalf("at +%v: %d items left, want %d (the 5 s ones are not due yet)", step, len(left), len(keep)+len(gone)-1)
				}
				if goneAt.IsZero() && len(left) == len(keep) {
					goneAt = b.clock.Now()
				}
			}
			if want := at(6 * time.Second); !goneAt.Equal(want) {
				t.Fatalf("the due items were all gone at %v, want by the first pass after their TTL, %v", goneAt, want)
			}
			checkCursor(t, b, s, st)
			// The refused delete, then the closing read of the current
			// window meeting the six items left in it; open windows never
			// read them.
			if got := value(t, s.m.skipped.WithLabelValues(reasonTooOld)); got != 7 {
				t.Fatalf("archiver_sweep_skipped_total{reason=ttl_too_old} = %v, want 7 (the refused delete, and 6 at the closing read)", got)
			}
			if got := value(t, s.m.skipped.WithLabelValues(reasonExtended)); got != 0 {
				t.Fatalf("ttl_extended = %v, want 0: a TTL set to 0 is no extension", got)
			}
		})
	}
}

// TestDeleteConditionIsDynamoDBsRule: the DeleteItem a pass sends states
// DynamoDB's rule itself, so an item that changed after the Query is
// judged by it at the delete.
func TestDeleteConditionIsDynamoDBsRule(t *testing.T) {
	b := newBed(t, bedOptions{})
	b.put(item{pk: "due", ttl: at(time.Second)})
	var cond []string
	b.api.beforeDelete = func(in *dynamodb.DeleteItemInput) {
		cond = append(cond, aws.ToString(in.ConditionExpression))
		if got := in.ExpressionAttributeValues[":oldest"].(*types.AttributeValueMemberN).Value; got != epochNumber(oldestTTL(at(2*time.Second)).UnixMilli()) {
			t.Errorf(":oldest = %s, want five years (less %v) before the delete", got, tooOldMargin)
		}
	}
	s := b.sweeper(nil)
	b.clock.Set(at(2 * time.Second))
	if st := b.pass(s); st.Deleted != 1 {
		t.Fatalf("%+v, want the due item deleted", st)
	}
	if len(cond) != 1 || !strings.Contains(cond[0], "attribute_type(#t, :n)") || !strings.Contains(cond[0], "#t < :now") || !strings.Contains(cond[0], "#t >= :oldest") {
		t.Fatalf("conditions %q, want a Number TTL below now and not older than five years", cond)
	}
}

func TestEpochNumber(t *testing.T) {
	for ms, want := range map[int64]string{0: "0.000", 1500: "1.500", -1: "-0.001", -86400500: "-86400.500", 1658266025123: "1658266025.123"} {
		if got := epochNumber(ms); got != want {
			t.Errorf("epochNumber(%d) = %q, want %q", ms, got, want)
		}
	}
}
