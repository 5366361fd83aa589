// Package sinks defines where classified stream events go, and opens the
// destinations by URL: S3 archives, NATS subjects, local files and stdout.
// Each destination is a package of its own (s3sink, natssink, filesink),
// none importing another; this package names their types and
// constructors again ([S3Sink], [NATSSink], [FileSink], [NewFileSink],
// ...), so callers write sinks.X.
//
// Every sink obeys one contract, checked by the conformance suite in this
// package's tests: a batch is acknowledged only once it is durable at the
// destination, events of one shard reach the destination in the order they
// were written, Close flushes, and failures surface as errors, never as
// silent drops. The contract's types are package sinkapi's, named again
// here ([Sink], [Batch], [Ack], [Options]); the URL grammar is package
// sinkurl's and the S3 configuration package objstore's, which the
// archive reader shares.
//
// # Sink URLs
//
// [Open] turns a URL into a sink: s3://BUCKET/PREFIX, nats://HOST:PORT,
// file://DIR or stdout://, each with query parameters (see [Open]);
// events=expired,deleted,... says which kinds the caller routes to it
// (default expired).
//
// # The archive line
//
// The file sink, the S3 sink, stdout:// and the NATS sink's cloudevents
// and envelope formats all write one JSON object per event
// ([event.AppendLine]):
//
//	{"Item":{"pk":{"S":"user#1"},"expiresAt":{"N":"1767322800"},...},
//	 "Keys":{"pk":{"S":"user#1"}},
//	 "Metadata":{"kind":"expired","table":"sessions","eventID":"...",
//	   "eventName":"REMOVE","sequenceNumber":"...","shardId":"...",
//	   "streamArn":"...","approximateCreationDateTime":"2026-01-02T03:04:05Z",
//	   "deletionTime":"2026-01-02T03:04:05Z","sizeBytes":321,
//	   "ttlAttribute":"expiresAt","ttlValue":"1767322800",
//	   "ttlTime":"2026-01-02T03:00:00Z","ttlLagSeconds":245,
//	   "deletedBy":"dynamodb-ttl"}}
//
// Item is the item's last image in DynamoDB JSON, the same form as
// DynamoDB's own S3 export: every type kept (S, N as the exact decimal
// string, B base64, SS, NS, BS, M, L, NULL, BOOL), so PutItem with Item
// restores the exact item. Keys are the key attributes; OldImage appears
// only for a MODIFY that carried both images. Metadata fields with unknown
// values are left out. Object keys inside the line are sorted, so the same
// event always renders to the same bytes. [event.DecodeLine] reads a line
// back into an event.
//
// Metadata.deletedBy, on every REMOVE, says who deleted the item:
// "dynamodb-ttl" (DynamoDB's TTL process) or "other" (anyone else: an
// application, a sweeper such as `archiver sweep`; the stream does not name
// them). A "deleted" event is always "other"; an "expired" one is
// "dynamodb-ttl", or "other" when the archiver runs with expired-when
// past-ttl and the item was deleted after its TTL had passed. The NATS sink
// also sets it as the Archiver-Deleted-By header on REMOVE messages.
//
// Metadata.image is "keys-only" when the event carries no image of the
// item (a KEYS_ONLY stream, or NEW_IMAGE for a REMOVE, accepted with
// `archiver run --allow-keys-only`): Item then holds the keys alone.
//
// # Where events go
//
//   - file://DIR: DIR/TABLE/YYYY-MM-DD/HH.jsonl (hour of the event's
//     creation time, UTC), appended (O_APPEND) and fsynced before the ack.
//     One sink holds DIR at a time (a lock in DIR/_archiver), and no
//     symbolic link below DIR is followed.
//   - stdout://: one line per event.
//   - s3://: PREFIX/table=T/kind=K/dt=YYYY-MM-DD/hr=HH/REGION.SHARD-FIRSTSEQ-LASTSEQ.jsonl.gz
//     (REGION: the Region of the stream the events were read from; see
//     [S3Sink] for buffering, naming and retries).
//   - nats://: one message per event on the subject template, with
//     Nats-Msg-Id set to the message ID (the event ID; an expiry's is the
//     same in every Region: [event.IDHasher]; see [NATSSink]); by default a
//     CloudEvent in the NATS binding's binary mode. docs/MESSAGES.md is
//     the messages' contract: subjects, headers, bodies and their JSON
//     Schemas, order and duplicates.
//
// # Coverage manifests
//
// The S3 and file sinks record coverage manifests (package manifest) in
// their archives, beside the data under _manifests/: the consumer calls
// Record for a shard's range (From, To] once every event of it was
// acknowledged by every sink, and RecordDue to ask whether the sink wants
// one now (manifest-objects=100 objects, or manifest-interval=10m, since
// the shard's last). A manifest lists the sink's objects holding the
// range's events with their stored size and SHA-256 (a file sink's growing
// hour files: their size after the shard's last append and the SHA-256 of
// that prefix, kept running as it appends), and names the shard's previous
// manifest (remembered, or found in the archive by the first Record of a
// shard in a process: the one ending at From, or for a shard's first range
// its parent's last, ended one). manifests=false turns it off: [Open] then
// returns a sink without Record and RecordDue.
package sinks
