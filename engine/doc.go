// Package engine is a local, in-memory DynamoDB and DynamoDB Streams
// server whose Time to Live really deletes: a drop-in for DynamoDB Local in
// tests and on laptops when the code under test reacts to TTL expiries.
//
// The engine speaks the DynamoDB JSON 1.0 protocol (X-Amz-Target
// DynamoDB_20120810.*) and the Streams protocol (DynamoDBStreams_20120810.*)
// on one endpoint and accepts any SigV4 credentials. Point any AWS SDK or
// the AWS CLI at it:
//
//	srv, err := engine.Listen("127.0.0.1:0", engine.Options{})
//	...
//	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
//		o.BaseEndpoint = aws.String(srv.Endpoint())
//	})
//
// or, from a shell, `archiver engine --listen 127.0.0.1:8000` and
// `aws dynamodb list-tables --endpoint-url http://127.0.0.1:8000`.
//
// One endpoint serves every Region: a request is in the Region its SigV4
// credential scope names (the SDK's configured Region), or in
// Options.Region when it carries none. Each Region has its own tables and
// streams, and an ARN of another Region is not found there. Go methods
// that take a table act on Options.Region for a name and on the ARN's
// Region for an ARN; SweepTTL sweeps every Region.
//
// Global tables version 2019.11.21: UpdateTable's ReplicaUpdates creates
// a replica of a table in another Region (its items copied) or deletes
// one; writes replicate asynchronously to every replica, last writer wins
// per item, and an expired item is deleted by one Region's TTL (the
// Region that wrote it last: a service REMOVE there, a plain REMOVE in the
// others' streams). SetReplicationDelay, PauseReplication,
// ResumeReplication, WaitReplication and SetTTLIndependent drive it in
// tests, as /_engine/replication and /_engine/ttl/independent do over
// HTTP.
//
// What it serves: tables (CreateTable, DescribeTable, ListTables,
// UpdateTable with streams on/off and GSI create/delete with backfill,
// DeleteTable), items (PutItem, GetItem, UpdateItem, DeleteItem, Query,
// Scan, BatchGetItem, BatchWriteItem, TransactWriteItems, TransactGetItems)
// and PartiQL (ExecuteStatement, BatchExecuteStatement, ExecuteTransaction)
// with the whole expression language, global and local secondary indexes,
// TTL (UpdateTimeToLive, DescribeTimeToLive), tags (TagResource,
// UntagResource, ListTagsOfResource) and the four Streams operations.
// TransactWriteItems and ExecuteTransaction honour ClientRequestToken for
// 10 minutes. Requests are validated as DynamoDB does, every constraint
// violation in one message, and errors carry AWS's codes and, where
// practical, its messages. Any other operation answers
// UnknownOperationException (docs/ENGINE.md lists them).
//
// TTL follows DynamoDB's documented rules. A background sweeper (every
// Options.TTLInterval) deletes each item whose TTL attribute is a Number of
// epoch seconds strictly below the clock's now and not more than five years
// in the past; strings, other types and missing attributes never expire.
// A TTL deletion removes the item from the table and every index and
// enters the stream as a REMOVE record with userIdentity
// {Type: "Service", PrincipalId: "dynamodb.amazonaws.com"}; a user's
// DeleteItem has no userIdentity. Expired items stay readable and
// updatable until a sweep reaches them, and an update that moves the TTL
// into the future keeps the item. Sweeps work in chunks, releasing the
// table lock between them, so reads and writes continue during a sweep of
// millions of items. Options.TTLLag delays each deletion by a stable
// per-item amount up to the given duration.
//
// For tests, Options.Clock takes a ManualClock, a negative TTLInterval
// turns the sweeper off, and SweepTTL runs one sweep on demand. Faults:
// ThrottleGetRecords, ThrottleBatchWrites and ThrottleBatchGets (partial
// batches with UnprocessedItems/UnprocessedKeys), ForceRollover,
// SplitShard, TrimStream, ExpireIterators, OmitShardFromDescribe (the
// next descriptions leave a shard out, as an inconsistent DescribeStream
// would), and Hooks.OnRequest (replaced while the engine runs with
// SetHook) to fail or observe any request.
//
// The same sweep, clock and faults are served over HTTP under /_engine/ on
// the engine's port (control_api.go), JSON in and out, for test suites in any
// language: POST /_engine/ttl/sweep, GET and POST /_engine/clock (moving
// it needs a ManualClock), POST /_engine/tables/{table}/rollover,
// .../trim, .../shards/{shard}/split, .../omit and .../records (a record of
// the caller's choosing, as InjectRecord), /_engine/iterators/expire and
// /_engine/throttle. A POST must be Content-Type: application/json and
// not come from another site (Origin, Sec-Fetch-Site), so a web page
// cannot drive it. Errors are {"error": "..."} with 400, 403, 404, 405,
// 408, 409 or 415. Only loopback clients may use it, and those in
// Options.ControlFrom.
//
// With Options.UI (archiver engine's default on loopback), a web console
// at /_engine/ui/ shows the tables, items with their TTL countdown, the
// streams' shards and records, and moves the clock, behind the control
// API's guards and a Content-Security-Policy (ui_serve.go, ui_api.go).
//
// A request that arrives on a loopback address must name localhost, a
// loopback address or the engine's own address in its Host header, or a
// name of Options.AllowHosts (DNS rebinding would otherwise give a web page
// the whole API). A Server from Listen bounds its connections: a body must
// arrive within Options.BodyTimeout, whatever length it announces, its
// buffer grows only with the bytes that arrive, idle connections close
// after Options.IdleTimeout, and at most Options.MaxConns are open.
//
// Everything lives in memory unless Options.DataDir (archiver engine
// --data-dir) names a directory: then tables, items, TTL settings, tags and
// streams (shards, records with their sequence numbers, the counters)
// survive a restart and a kill -9. Every change goes to a write-ahead log
// that is fsynced before the request that made it is answered (concurrent
// requests share one fsync); snapshots keep start-up short; one engine at a
// time may use a directory. Shard iterators and sequence numbers stay
// valid across a restart.
//
// The source is grouped by part, each a prefix of its files: http_* (the
// HTTP layer: ServeHTTP, Server, connection bounds, the Host guard, a
// request's Region), api_* (the DynamoDB API's handlers, each validating a
// request before applying it), store_* (the table store: tables, items,
// indexes, the one write path, the TTL sweeper), global_* (global tables'
// replication), persist_* (the data directory: write-ahead log, snapshots,
// start-up), control_* (the /_engine/ control API and the fault hooks)
// and ui_* (the web console, its files in engine/ui/);
// engine.go holds Engine and Options. Below them, engine/internal holds
// the parts with a boundary of their own: apimodel (the API model's
// constraints), attr (attribute values), expr (the expression language),
// partiql, stream (DynamoDB Streams) and wal (the write-ahead log).
// docs/DESIGN.md ("The engine") names every file.
package engine
