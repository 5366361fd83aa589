package shard

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GlobalTable is what a table's description says of its replicas.
//
// A global table (version 2019.11.21) is one table with a replica in each
// of several Regions, each with its own stream. DynamoDB's TTL deletes an
// expired item in one Region, and only that Region's stream marks the
// REMOVE as DynamoDB's (userIdentity Service); the delete is replicated to
// every other replica, whose streams get a plain REMOVE, as for a user's
// delete. So the expiries a Region's stream marks are those its own TTL
// performed, and an archiver that reads one Region with the default
// classification archives that Region's share of the expiries.
type GlobalTable struct {
	// Version is the description's GlobalTableVersion ("2019.11.21"); ""
	// for a table without replicas.
	Version string
	// Regions are the Regions holding a replica, the one described
	// included, sorted; nil for a table that is not global.
	Regions []string
	// Strong is multi-Region strong consistency (MRSC), on which DynamoDB
	// runs no TTL at all.
	Strong bool
}

// IsGlobal reports whether the table has replicas in other Regions.
func (g GlobalTable) IsGlobal() bool { return g.Version != "" || len(g.Regions) > 1 }

// globalTable reads a table description's replicas; region is the Region
// described (added to the replicas when the description leaves it out).
func globalTable(t *ddbtypes.TableDescription, region string) GlobalTable {
	g := GlobalTable{Version: aws.ToString(t.GlobalTableVersion), Strong: t.MultiRegionConsistency == ddbtypes.MultiRegionConsistencyStrong}
	if len(t.Replicas) == 0 && g.Version == "" {
		return g
	}
	for _, r := range t.Replicas {
		if n := aws.ToString(r.RegionName); n != "" && !slices.Contains(g.Regions, n) {
			g.Regions = append(g.Regions, n)
		}
	}
	if region != "" && !slices.Contains(g.Regions, region) {
		g.Regions = append(g.Regions, region)
	}
	slices.Sort(g.Regions)
	return g
}

// GlobalCheck says how an archiver reads a table's replicas, so that
// [GlobalCheck.Check] can tell whether every expiry of a global table is
// archived exactly once, by this archiver or by the others it names.
type GlobalCheck struct {
	// Read are the Regions this archiver reads the table in.
	Read []string
	// PerRegion: an archiver like this one reads each other Region of the
	// table (one deployment per Region).
	PerRegion bool
	// PastTTL: a REMOVE made after the item's TTL passed is an expiry too
	// (--expired-when past-ttl), so the TTL deletes replicated from other
	// Regions are expiries in every stream.
	PastTTL bool
	// WantsExpired and WantsDeleted: some sink takes expired (deleted)
	// events.
	WantsExpired, WantsDeleted bool
}

// Verdict is what [GlobalCheck.Check] finds about one table: Info lines
// to log, Warn lines to log loudly; a configuration that cannot archive
// every expiry exactly once is an error instead.
type Verdict struct {
	Info, Warn []string
}

// Check judges how src's table is read. A table that is not global gets
// an empty verdict.
func (c GlobalCheck) Check(src Source) (Verdict, error) {
	g := src.Global
	if !g.IsGlobal() && !g.Strong {
		return Verdict{}, nil
	}
	var v Verdict
	name := src.Table
	if g.Strong && !c.PastTTL && c.WantsExpired {
		return v, fmt.Errorf("table %s is a multi-Region strongly consistent global table (MRSC): DynamoDB runs no TTL on such tables, "+
			"so no expiry would ever be archived; expire its items with `archiver sweep` (in one Region) and archive them with "+
			"--expired-when past-ttl, reading that one Region", name)
	}
	unread := without(g.Regions, c.Read)
	v.Info = append(v.Info, fmt.Sprintf("table %s is a global table (version %s) with replicas in %s; this archiver reads %s",
		name, cmp.Or(g.Version, "unknown"), list(g.Regions), list(c.Read)))
	if c.PastTTL {
		if err := c.pastTTL(name, g); err != nil {
			return v, err
		}
		v.Info = append(v.Info, fmt.Sprintf("past-ttl: every Region's expiries of %s are archived from %s's stream: its own TTL's "+
			"deletes and those replicated from %s; run exactly one such archiver for the table, never one per Region", name, list(c.Read), list(unread)))
	} else if c.WantsExpired {
		v.serviceCoverage(c, name, unread)
	}
	if c.WantsDeleted {
		v.Warn = append(v.Warn, fmt.Sprintf("every Region's stream of %s carries each user delete, and each expiry another Region's TTL "+
			"performed, as a plain REMOVE: its deleted events are archived once per Region read, and include those expiries", name))
	}
	return v, nil
}

// pastTTL refuses past-ttl over more than one Region: each Region's
// stream holds every expiry (its own TTL's, and the others' replicated),
// so each would be archived once per Region.
func (c GlobalCheck) pastTTL(name string, g GlobalTable) error {
	switch {
	case len(c.Read) > 1:
		return fmt.Errorf("--expired-when past-ttl on global table %s reading %s: every Region's stream holds every expiry "+
			"(its own TTL's, and the others' replicated as plain deletes), so each would be archived %d times; "+
			"read one Region (drop --regions): its stream alone holds every Region's expiries", name, list(c.Read), len(c.Read))
	case c.PerRegion:
		return fmt.Errorf("--expired-when past-ttl with --per-region on global table %s: an archiver per Region would archive "+
			"every expiry once in each of %s; with past-ttl run one archiver for the table, in one Region, without --per-region", name, list(g.Regions))
	}
	return nil
}

// serviceCoverage says whose expiries a service-classifying archiver
// archives: its own Regions' TTL deletes only.
func (v *Verdict) serviceCoverage(c GlobalCheck, name string, unread []string) {
	switch {
	case len(unread) == 0:
		v.Info = append(v.Info, fmt.Sprintf("every replica of %s is read: each expiry is archived once, from the stream of the Region whose TTL deleted it", name))
	case c.PerRegion:
		v.Info = append(v.Info, fmt.Sprintf("this archiver archives the expiries DynamoDB's TTL performs in %s; those of %s are "+
			"archived by the archivers there (--per-region)", list(c.Read), name+" in "+list(unread)))
	default:
		v.Warn = append(v.Warn, fmt.Sprintf("the expiries DynamoDB's TTL performs in %s are NOT archived by this archiver: "+
			"they reach %s's stream as plain deletes, like a user's; run an archiver in each of those Regions with --per-region "+
			"(the Terraform module once per Region), or read every replica from here with --regions all", list(unread), list(c.Read)))
	}
}

// without returns the elements of all not in some, in order.
func without(all, some []string) []string {
	var out []string
	for _, r := range all {
		if !slices.Contains(some, r) {
			out = append(out, r)
		}
	}
	return out
}

// list renders Region names for a log line.
func list(rs []string) string {
	if len(rs) == 0 {
		return "none"
	}
	return strings.Join(rs, ", ")
}
