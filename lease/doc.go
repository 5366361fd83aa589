// Package lease decides which shards of a stream this worker reads when
// several workers share it, and fences every write to a shard's state so
// that a worker that lost a shard can never overwrite the new owner's.
//
// # What a lease is
//
// A lease is a worker's right to read one shard (or, for `archiver sweep`,
// to sweep one table) until its expiry: the item of the shard in the lease
// table names the owner (lease_owner), a fencing token (lease_counter,
// incremented whenever ownership changes) and the expiry (lease_expiry_ms).
// The owner renews it on its own timer; a watchdog stops the shard's reader
// a safety margin before the lease can expire when renewals keep failing;
// every write to the item is conditional on owner and counter, so a worker
// that lost the lease fails with an error matching [ErrLeaseLost] and
// writes nothing. No worker compares another worker's clock with its own:
// a lease held by another worker counts as expired once this worker has
// seen it unchanged (not renewed) for a lease duration, timed on this
// worker's clock, as KCL does.
//
// # The planner
//
// Every assignment round ([Store.Assign], the walker's shard.Assigner)
// reads the stream's items and the workers' heartbeats, and planLeases
// decides, as a pure function of what was read (plan.go, table-tested in
// plan_test.go): this worker's fair share (ceil(ready shards / live
// workers)), the free or expired leases it takes up to that share, the
// leases handed over to it, and the one lease it asks the most loaded
// worker for when it holds fewer. The conditional writes that carry the
// plan out are beside it (assign.go, release.go).
//
// # The table
//
// Partition key "stream_arn" (S), sort key "shard_id" (S); the names are
// in internal/leasetable, the one place that reads and writes the table's
// items (this package, package checkpoint and sweep/state share it). One
// item per shard (stream_arn = the stream ARN):
//
//	lease_owner     S    worker holding the lease; absent when free
//	lease_counter   N    fencing token, incremented whenever ownership changes
//	lease_expiry_ms N    epoch milliseconds until which the owner may read
//	checkpoint_seq  S    last acknowledged sequence number (package checkpoint)
//	shard_finished  BOOL the shard was read to its end and acknowledged
//	parent_shards   SS   parent shard IDs
//	handoff_to      S    a worker that asked the owner to hand the lease over
//	updated_ms      N    time of the last write
//
// and one heartbeat item per live worker and stream (stream_arn =
// "workers#" + stream ARN, shard_id = worker ID, lease_expiry_ms), so a
// worker that holds nothing yet still counts when shares are computed, and
// one item per table that `archiver sweep` sweeps (stream_arn = "sweep#" +
// TABLE, shard_id = "cursor"): the sweeper's lease in the same lease
// fields, and its cursor in sweep_cursor_ms (package sweep/state). With
// Options.Namespace every stream_arn above is prefixed "ns/NAME#", so
// deployments of different namespaces share a table apart. Loading
// a stream's checkpoints is a Query on its partition. Every attribute name
// holds an underscore, so none is a reserved word in expressions. Finished
// shards stay recorded for PruneFinishedAfter (72 h, past the stream's
// 24 h retention).
//
// Errors keep the prefix "checkpoint:" they had before this code left
// package checkpoint: operators know the table by --checkpoint.
package lease
