package lease

import (
	"reflect"
	"sort"
	"testing"
	"time"
)

// planClock is the fixed instant the planning tests run at.
var planClock = time.Unix(1_000_000, 0)

const planLease = 10 * time.Second

// leased is a row owned by owner, first seen at planClock, whose lease
// runs for d past it by this worker's clock (negative: expired that long
// ago).
func leased(id, owner string, counter int64, d time.Duration) row {
	exp := planClock.Add(d).UnixMilli()
	return row{Shard: id, Owner: owner, Counter: counter, ExpiryMS: exp, Exists: true,
		Observed: true, SeenAt: planClock, LocalExpiryMS: exp}
}

// freed is a row nobody owns, first seen seen ago.
func freed(id string, seen time.Duration) row {
	return row{Shard: id, Counter: 1, Exists: true, Observed: true, SeenAt: planClock.Add(-seen)}
}

func readyOf(ids ...string) []readyShard {
	out := make([]readyShard, len(ids))
	for i, id := range ids {
		out[i] = readyShard{id: id}
	}
	return out
}

func rowsOf(rs ...row) map[string]row {
	m := map[string]row{}
	for _, r := range rs {
		m[r.Shard] = r
	}
	return m
}

// beat is a heartbeat of a worker, current for d past planClock.
func beat(worker string, d time.Duration) row {
	return row{Shard: worker, ExpiryMS: planClock.Add(d).UnixMilli(), Exists: true}
}

func TestPlanLeases(t *testing.T) {
	type want struct {
		target, mine int
		adopt, free  []string
		stale        []string
		pending      bool
		counts       map[string]int
	}
	tests := []struct {
		name    string
		ready   []readyShard
		rows    map[string]row
		beats   map[string]row
		held    map[string]bool
		history map[string]int64
		want    want
	}{
		{
			name:  "alone on a new table: every shard is free, the share is all",
			ready: readyOf("s1", "s2", "s3"),
			want:  want{target: 3, free: []string{"s1", "s2", "s3"}, counts: map[string]int{}},
		},
		{
			name:  "a live heartbeat halves the share",
			ready: readyOf("s1", "s2", "s3", "s4"),
			beats: rowsOf(beat("b", planLease)),
			want:  want{target: 2, free: []string{"s1", "s2", "s3", "s4"}, counts: map[string]int{}},
		},
		{
			name:  "an expired heartbeat does not count",
			ready: readyOf("s1", "s2"),
			beats: rowsOf(beat("b", -time.Second)),
			want:  want{target: 2, free: []string{"s1", "s2"}, counts: map[string]int{}},
		},
		{
			name:  "another worker's live lease is not free and counts as its load",
			ready: readyOf("s1", "s2", "s3"),
			rows:  rowsOf(leased("s1", "b", 3, planLease)),
			want:  want{target: 2, free: []string{"s2", "s3"}, counts: map[string]int{"b": 1}},
		},
		{
			name:  "an expired lease is free",
			ready: readyOf("s1"),
			rows:  rowsOf(leased("s1", "b", 3, -time.Second)),
			want:  want{target: 1, free: []string{"s1"}, counts: map[string]int{}},
		},
		{
			name:  "a lease nobody took for a lease duration is stale",
			ready: readyOf("s1", "s2"),
			rows:  rowsOf(freed("s1", 2*planLease), freed("s2", planLease/2)),
			want:  want{target: 2, free: []string{"s1", "s2"}, stale: []string{"s1"}, counts: map[string]int{}},
		},
		{
			name:    "a lease naming this worker at a counter it never held is adopted",
			ready:   readyOf("s1", "s2"),
			rows:    rowsOf(leased("s1", "a", 5, planLease), leased("s2", "a", 7, planLease)),
			history: map[string]int64{"s2": 7},
			want:    want{target: 2, adopt: []string{"s1"}, counts: map[string]int{}},
		},
		{
			name:  "held shards are left alone; only those being read count as mine",
			ready: readyOf("s1", "s2", "s3"),
			rows:  rowsOf(leased("s1", "a", 1, planLease), leased("s2", "a", 1, planLease)),
			held:  map[string]bool{"s1": true, "s2": false},
			want:  want{target: 3, mine: 1, free: []string{"s3"}, counts: map[string]int{}},
		},
		{
			name:  "finished shards are never taken",
			ready: readyOf("s1"),
			rows:  rowsOf(row{Shard: "s1", Counter: 2, Finished: true, Exists: true}),
			want:  want{target: 1, counts: map[string]int{}},
		},
		{
			name:  "a child waits while its parent is read",
			ready: []readyShard{{id: "child", parents: []string{"parent"}}},
			rows:  rowsOf(leased("parent", "b", 2, planLease)),
			want:  want{target: 1, counts: map[string]int{}},
		},
		{
			name:  "a parent recorded in the child's row holds it back too",
			ready: readyOf("child"),
			rows:  rowsOf(leased("parent", "b", 2, planLease), row{Shard: "child", Parents: []string{"parent"}, Exists: true}),
			want:  want{target: 1, counts: map[string]int{}},
		},
		{
			name:  "a finished or unleased parent lets the child go",
			ready: []readyShard{{id: "c1", parents: []string{"p1"}}, {id: "c2", parents: []string{"p2"}}},
			rows:  rowsOf(row{Shard: "p1", Finished: true, Exists: true}, row{Shard: "p2", Exists: true}),
			want:  want{target: 2, free: []string{"c1", "c2"}, counts: map[string]int{}},
		},
		{
			name:  "a hand-off this worker asked for is pending",
			ready: readyOf("s1", "s2"),
			rows:  rowsOf(row{Shard: "s1", Owner: "b", Counter: 2, ExpiryMS: planClock.Add(planLease).UnixMilli(), Handoff: "a", Exists: true}),
			want:  want{target: 1, free: []string{"s2"}, pending: true, counts: map[string]int{"b": 1}},
		},
		{
			name:  "leases of shards that are not ready do not count",
			ready: readyOf("s1"),
			rows:  rowsOf(leased("old", "b", 2, planLease)),
			want:  want{target: 1, free: []string{"s1"}, counts: map[string]int{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := leaseView{me: "a", now: planClock, leaseD: planLease, ready: tc.ready,
				rows: tc.rows, beats: tc.beats, held: tc.held, history: tc.history}
			if v.rows == nil {
				v.rows = map[string]row{}
			}
			p := planLeases(v)
			got := want{target: p.target, mine: p.mine, pending: p.pending, counts: p.counts}
			for _, r := range p.adopt {
				got.adopt = append(got.adopt, r.Shard)
			}
			for _, f := range p.free {
				got.free = append(got.free, f.shard.id)
				if f.stale {
					got.stale = append(got.stale, f.shard.id)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
}

func TestPlanTakeFree(t *testing.T) {
	p := leasePlan{target: 2}
	tests := []struct {
		name  string
		stale bool
		mine  int
		want  bool
	}{
		{"below the share", false, 1, true},
		{"at the share", false, 2, false},
		{"stale beyond the share", true, 5, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.takeFree(freeLease{stale: tc.stale}, tc.mine); got != tc.want {
				t.Errorf("takeFree = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanHandoff(t *testing.T) {
	loaded := func(owner string, ids ...string) []row {
		var out []row
		for _, id := range ids {
			out = append(out, leased(id, owner, 1, planLease))
		}
		return out
	}
	tests := []struct {
		name       string
		rows       []row
		mine       int
		pending    bool
		wantVictim string
		wantShard  string
	}{
		{"the most loaded worker's newest shard", append(loaded("b", "s1", "s2", "s3"), loaded("c", "s4", "s5")...), 0, false, "b", "s3"},
		{"ties go to the lowest name", append(loaded("c", "s1", "s2", "s3"), loaded("b", "s4", "s5", "s6")...), 0, false, "b", "s6"},
		{"not when the victim holds fewer than two more", loaded("b", "s1", "s2"), 1, false, "", ""},
		{"not at the share", loaded("b", "s1", "s2", "s3", "s4", "s5"), 3, false, "", ""},
		{"not while a request is pending", loaded("b", "s1", "s2", "s3"), 0, true, "", ""},
		{"not a shard already asked for", []row{
			{Shard: "s1", Owner: "b", Counter: 1, ExpiryMS: planClock.Add(planLease).UnixMilli(), Handoff: "c", Exists: true},
			{Shard: "s2", Owner: "b", Counter: 1, ExpiryMS: planClock.Add(planLease).UnixMilli(), Handoff: "c", Exists: true},
		}, 0, false, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			for _, r := range tc.rows {
				ids = append(ids, r.Shard)
			}
			sort.Strings(ids)
			p := planLeases(leaseView{me: "a", now: planClock, leaseD: planLease,
				ready: readyOf(ids...), rows: rowsOf(tc.rows...)})
			p.pending = p.pending || tc.pending
			victim, r, ok := p.handoff(tc.mine)
			if victim != tc.wantVictim || r.Shard != tc.wantShard || ok != (tc.wantVictim != "") {
				t.Errorf("handoff(%d) = %q %q %v, want %q %q (target %d, counts %v)",
					tc.mine, victim, r.Shard, ok, tc.wantVictim, tc.wantShard, p.target, p.counts)
			}
		})
	}
}
