package lease

import (
	"sort"
	"time"

	"github.com/ttl-archiver/archiver/internal/leasetable"
)

// Lease planning: which leases of a stream this worker takes, adopts or
// asks for, decided from what it read of the lease table. These are pure
// functions of their inputs; the I/O (reading the table, the conditional
// writes) is in assign.go.

// readyShard is a shard the walker may start: not finished, parents done.
type readyShard struct {
	id      string
	parents []string
}

// leaseView is what one planning round reads: a stream's shard items and
// heartbeats as this worker observed them (see leasetable.Row.Expired), and
// this worker's own leases.
type leaseView struct {
	me      string        // this worker
	now     time.Time     // this worker's clock
	leaseD  time.Duration // the lease duration
	ready   []readyShard  // the walker's ready shards, in lineage order
	rows    map[string]leasetable.Row
	beats   map[string]leasetable.Row // heartbeat items, by worker
	held    map[string]bool           // shards this worker holds: true while read, false while stopping
	history map[string]int64          // the last counter this worker held per shard
}

// leasePlan is the outcome of a planning round.
type leasePlan struct {
	// target is this worker's fair share: ceil(ready shards / live
	// workers), counting this worker, every worker with a current
	// heartbeat, and every owner of a live lease of a ready shard.
	target int
	// mine is how many leases of ready shards this worker holds and reads.
	mine int
	// adopt are leases that name this worker at a counter it never held:
	// handed over to it, or held under its ID before a restart.
	adopt []leasetable.Row
	// free are leases nobody holds (free, expired or not yet written),
	// in ready order, to take while mine is below target.
	free []freeLease
	// pending: this worker already asked another for a lease; it asks
	// for at most one at a time.
	pending bool
	// counts are the live leases of ready shards per other worker.
	counts map[string]int

	now      time.Time
	rows     map[string]leasetable.Row
	readySet map[string]bool
}

// freeLease is a lease planLeases found free.
type freeLease struct {
	shard readyShard
	row   leasetable.Row
	// stale: nobody took it for a whole lease duration (a worker that
	// counts as live but cannot read it, e.g. at its concurrency limit).
	// It is taken beyond the fair share, so no shard stays unread.
	stale bool
}

// planLeases decides a round: the fair share, the leases handed over to
// this worker, and the free leases it may take. A shard this worker holds,
// a finished one, and one whose parent is still being read are left alone.
func planLeases(v leaseView) leasePlan {
	p := leasePlan{now: v.now, rows: v.rows, counts: map[string]int{},
		readySet: make(map[string]bool, len(v.ready))}
	for _, r := range v.ready {
		p.readySet[r.id] = true
	}
	live := map[string]bool{v.me: true}
	for w, b := range v.beats {
		if !b.Expired(v.now) {
			live[w] = true
		}
	}
	for id, r := range v.rows {
		if !p.readySet[id] || r.Finished || !r.Live(v.now) {
			continue
		}
		live[r.Owner] = true
		if r.Owner != v.me {
			p.counts[r.Owner]++
			if r.Handoff == v.me {
				p.pending = true
			}
		}
	}
	p.target = (len(v.ready) + len(live) - 1) / len(live)
	for id, reading := range v.held {
		if reading && p.readySet[id] {
			p.mine++
		}
	}
	for _, rs := range v.ready {
		if _, held := v.held[rs.id]; held {
			continue
		}
		r := v.rows[rs.id]
		if r.Finished || parentBusy(v.rows, rs, r, v.now) {
			continue
		}
		switch {
		case r.Owner == v.me && r.Live(v.now) && v.history[rs.id] != r.Counter:
			p.adopt = append(p.adopt, r)
		case !r.Live(v.now):
			stale := r.Exists && v.now.Sub(r.SeenAt) > v.leaseD
			p.free = append(p.free, freeLease{shard: rs, row: r, stale: stale})
		}
	}
	return p
}

// takeFree reports whether this worker, holding mine leases, takes f:
// below its share, or f is stale.
func (p leasePlan) takeFree(f freeLease, mine int) bool {
	return mine < p.target || f.stale
}

// handoff picks the lease to ask for when this worker, holding mine,
// is below its share and has no request pending: the newest ready shard
// (its lineage is least likely to end soon) of the most loaded worker
// (ties: the lowest name), if that worker holds at least two more than
// this one and the shard has no hand-off request yet.
func (p leasePlan) handoff(mine int) (victim string, r leasetable.Row, ok bool) {
	if mine >= p.target || p.pending {
		return "", leasetable.Row{}, false
	}
	for w, n := range p.counts {
		if n > mine+1 && (victim == "" || n > p.counts[victim] || (n == p.counts[victim] && w < victim)) {
			victim = w
		}
	}
	if victim == "" {
		return "", leasetable.Row{}, false
	}
	var ids []string
	for id, r := range p.rows {
		if p.readySet[id] && r.Owner == victim && r.Live(p.now) && r.Handoff == "" && !r.Finished {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "", leasetable.Row{}, false
	}
	sort.Strings(ids)
	return victim, p.rows[ids[len(ids)-1]], true
}

// parentBusy reports whether a parent of the shard is recorded unfinished
// and is being read by someone: then the child must wait. A parent row that
// is unfinished and unleased belongs to a shard the walker no longer sees in
// the stream (trimmed), which does not block its children.
func parentBusy(rows map[string]leasetable.Row, rs readyShard, r leasetable.Row, now time.Time) bool {
	for _, list := range [][]string{rs.parents, r.Parents} {
		for _, p := range list {
			if pr, ok := rows[p]; ok && !pr.Finished && pr.Live(now) {
				return true
			}
		}
	}
	return false
}
