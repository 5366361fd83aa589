// Package e2e holds the end-to-end tests of TTL Archiver: the whole pipeline
// (engine → shard walker → consumer → sinks, with checkpoints) driven over
// real HTTP with the real AWS SDK clients, a real S3-compatible server
// (versitygw), an embedded NATS server with JetStream, and the real
// `archiver` binary killed with SIGKILL in a loop.
//
// The package has no code of its own; everything is in its tests (doc.go
// and _test.go files only, imported by nothing: TestE2EIsTestOnly in
// internal/housetest):
//
//   - crashloop_test.go: `archiver run` as a process against `archiver
//     engine` as a process, killed at random moments CRASHLOOP_ROUNDS times
//     (default 5) while items keep expiring; every expired key must reach
//     the file sink and S3, and JetStream must hold each exactly once. TestCrashLoopLeases (with CRASHLOOP_ROUNDS or
//     E2E_LEASES=1 set) does the same with two processes sharing the stream
//     through the DynamoDB lease store.
//   - coverage_test.go: issue 27's "done when", each proven by `archiver
//     verify --from` from the archive alone: 20,000 expiries over 8 shards
//     that roll over, two workers on leases writing to S3, one killed with
//     SIGKILL mid-run: complete, every shard covered (TestCoverageKillNineVerify);
//     copies of an S3 and a file archive with a data object deleted, a
//     line edited or a manifest deleted: each found, naming the shard and
//     the range (TestCoverageTamper); a shard whose first records passed
//     the retention before it was read: a trimmed start with its time
//     (TestCoverageTrimmedStart).
//   - pipeline_test.go: E2E_ITEMS (default 50,000) expired items reach both
//     S3 and JetStream at once; user deletes reach neither.
//   - faults_test.go: engine throttling, trimmed data, expired iterators,
//     shard splits, a failing sink and a throttled lease table; nothing is
//     lost.
//   - chaos_test.go: issue 11's chaos suite, in process, each test counting
//     every expired item at the far end (archive ∪ dead-letter sink), with
//     duplicates only above the checkpoints: TestChaosPoisonRecord (two
//     undecodable records among 10,000 expiries go to the dead-letter sink
//     and the shards go on), TestChaosS3Outage (S3 unreachable for 30 s,
//     no dead-letter sink), TestChaosBucketDeleted (the bucket deleted
//     while running; later items dead-lettered naming the S3 sink),
//     TestChaos412AfterCrash (a lost checkpoint after the uploads: 412s on
//     objects with other bytes, resolved by their event IDs),
//     TestChaosDescribeOmitsParent (an unfinished closed parent left out of
//     a DescribeStream answer, with the file store and the lease table) and
//     TestChaosMalformedLastRecordThenNewIterator (a malformed record last
//     in its answer, then every iterator expires: nothing read twice).
//   - unparseable_test.go: records the SDK cannot parse (a number where a
//     string belongs, a B that is not base64, two type members), planted by
//     the corrupting front: with a dead-letter sink each lands there with
//     its raw bytes and everything else is archived; without one the shard
//     is reported stuck and its checkpoint never passes the record.
//   - chaos_proc_test.go: the chaos tests with `archiver run` as a process:
//     TestChaosNATSMaxPayload (issue 11's "done when": three 200 KB items
//     over a 64 KiB max_payload land in the file dead-letter sink, the small
//     ones on JetStream, and a clean restart re-delivers nothing) and
//     TestChaosKillWhileDeadLettering (SIGKILL while an S3 dead-letter
//     upload waits for its answer; after the restart both sinks hold every
//     item, duplicates only above the checkpoints at the kill).
//   - nats_subject_test.go: issue 19's NATS "done when": an item with a
//     2048-byte binary hash key and a 1024-byte range key among 200 small
//     expiries of orders.v2 and orders_v2 under bk.{table}.{kind}.{pk}.{sk}
//     never breaks the connection (every small one on JetStream, each item
//     on a subject of its own), and a connection the server closed for good
//     (a restart refusing the archiver's password) is replaced.
//   - sweep_test.go: issue 12's "done when": `archiver sweep` and `archiver
//     run --expired-when past-ttl` as processes against an engine whose own
//     TTL is off; every swept item reaches NATS once as an expiry, user
//     deletes never do, and arrival minus TTL is logged.
//   - source_preflight_test.go: issue 19's "done when": `archiver run`
//     against a missing table, a table without a stream, a KEYS_ONLY stream
//     and a dead endpoint exits 1 within 30 s, naming the problem.
package e2e
