package conformance

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// Checks is the whole suite, in the order it runs: TTL's deletions, what
// they leave behind, Streams, then global tables.
func Checks() []Check {
	all := append(ttlChecks(), ttlRecordChecks()...)
	all = append(all, streamChecks()...)
	return append(all, Check{Name: "global-replicas", Run: checkReplicas,
		Asserts: "a replica added with UpdateTable ReplicaUpdates (version 2019.11.21) gets the writes of either Region, and a TTL deletion is made once, by the service in one Region, and replicated to the other as a REMOVE without userIdentity"})
}

// replica is a global table of two Regions as the check sees it.
type replica struct {
	table      string
	db         [2]*dynamodb.Client
	st         [2]*dynamodbstreams.Client
	arn        [2]string
	region     [2]string
	replicated int // items seen arriving in the other Region
}

func checkReplicas(ctx context.Context, e *Env) Outcome {
	if e.In == nil || e.OtherRegion == "" || e.OtherRegion == e.Region {
		return skipf("no second Region to put a replica in")
	}
	r, out := e.newReplica(ctx)
	if r == nil {
		return out
	}
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	for i, id := range []string{"from-first", "from-second"} {
		if err := put(ctx, r.db[i], r.table, key(id)); err != nil {
			return failed("writing in "+r.region[i], err)
		}
		if o := r.arrives(ctx, e, 1-i, id, true); o != nil {
			return *o
		}
	}
	if err := put(ctx, r.db[0], r.table, expiring("expired", now.Add(-expiredAgo).Unix())); err != nil {
		return failed("writing", err)
	}
	delay, bad := e.awaitExpiry(ctx, r.db[0], r.table, "expired")
	if bad != nil {
		return *bad
	}
	if o := r.arrives(ctx, e, 1, "expired", false); o != nil {
		return *o
	}
	out = r.oneServiceRemove(ctx, e)
	out.Delay = delay
	return out
}

// newReplica creates a table in e's Region and adds a replica in
// OtherRegion; nil and the outcome when the endpoint cannot.
func (e *Env) newReplica(ctx context.Context) (*replica, Outcome) {
	db2, st2 := e.In(e.OtherRegion)
	r := &replica{db: [2]*dynamodb.Client{e.DynamoDB, db2}, st: [2]*dynamodbstreams.Client{e.Streams, st2}, region: [2]string{e.Region, e.OtherRegion}}
	var err error
	if r.table, r.arn[0], err = e.table(ctx, e.DynamoDB, tableSpec{ttl: true, stream: types.StreamViewTypeNewAndOldImages}); err != nil {
		return nil, failed("creating the table", err)
	}
	if _, err := db2.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &r.table}); err == nil {
		return nil, skipf("the endpoint keeps no Regions apart: the table created in %s is in %s too, so it can have no replica", e.Region, e.OtherRegion)
	}
	_, err = e.DynamoDB.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: &r.table,
		ReplicaUpdates: []types.ReplicationGroupUpdate{{Create: &types.CreateReplicationGroupMemberAction{RegionName: &e.OtherRegion}}}})
	if err != nil {
		return nil, skipf("the endpoint has no global tables: UpdateTable ReplicaUpdates Create: %v", short(err))
	}
	e.defer_(func(ctx context.Context) error { return deleteTable(ctx, db2, r.table) })
	desc, err := waitActive(ctx, db2, r.table, e.Bound)
	if err != nil {
		return nil, failf("UpdateTable accepted a replica in %s, but there: %v", e.OtherRegion, short(err))
	}
	if _, err := waitActive(ctx, e.DynamoDB, r.table, tableWait); err != nil {
		return nil, failed("after adding the replica", err)
	}
	if r.arn[1] = aws.ToString(desc.LatestStreamArn); r.arn[1] == "" {
		return nil, failf("the replica in %s has no stream (a global table's replicas have NEW_AND_OLD_IMAGES streams)", e.OtherRegion)
	}
	return r, Outcome{}
}

// arrives waits for the item id to be there (or gone) in Region i.
func (r *replica) arrives(ctx context.Context, e *Env, i int, id string, there bool) *Outcome {
	_, err := e.waitFor(ctx, e.Bound, true, func(ctx context.Context) error {
		it, err := get(ctx, r.db[i], r.table, id)
		if err == nil && (it != nil) != there {
			return errNotYet
		}
		return err
	})
	if err == nil {
		r.replicated++
		return nil
	}
	verb := "written in " + r.region[1-i] + " did not arrive"
	if !there {
		verb = "deleted by TTL in " + r.region[1-i] + " was not deleted"
	}
	o := failf("the item %s %s in %s within the bound (%v): %v", id, verb, r.region[i], e.Bound, short(err))
	return &o
}

// oneServiceRemove reads both Regions' streams for the expired item's
// REMOVE: exactly one must carry the service's userIdentity.
func (r *replica) oneServiceRemove(ctx context.Context, e *Env) Outcome {
	var service, plain []string
	for i := range r.region {
		recs, err := e.awaitRecords(ctx, r.st[i], r.arn[i], "the REMOVE of the expired item in "+r.region[i], has(stypes.OperationTypeRemove, "expired"))
		if err != nil {
			return failed("reading the stream", err)
		}
		for _, rec := range recs {
			if recordID(rec) != "REMOVE expired" {
				continue
			}
			if event.IsTTLDelete(&rec) {
				service = append(service, r.region[i])
			} else {
				plain = append(plain, r.region[i]+" ("+identity(rec.UserIdentity)+")")
			}
		}
	}
	if len(service) != 1 || len(plain) != 1 || strings.Contains(plain[0], "Type") {
		return failf("the expired item's REMOVEs: by the service in [%s], others in [%s]; want one by the service and one without userIdentity",
			strings.Join(service, ", "), strings.Join(plain, ", "))
	}
	return passf("writes replicated both ways between %s and %s; the TTL deletion is the service's in %s and a plain REMOVE in the other",
		r.region[0], r.region[1], service[0])
}
