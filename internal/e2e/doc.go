// Package e2e holds the end-to-end tests of TTL Archiver: the whole pipeline
// (engine → shard walker → consumer → sinks, with checkpoints) driven over
// real HTTP with the real AWS SDK clients, a real S3-compatible server
// (versitygw), an embedded NATS server with JetStream, and the real
// `archiver` binary killed with SIGKILL in a loop.
//
// The package has no code of its own; everything is in its tests:
//
//   - crashloop_test.go: `archiver run` as a process against `archiver
//     engine` as a process, killed at random moments CRASHLOOP_ROUNDS times
//     (default 5) while items keep expiring; every expired key must reach
//     the file sink and S3, and JetStream must hold each exactly once. TestCrashLoopLeases (with CRASHLOOP_ROUNDS or
//     E2E_LEASES=1 set) does the same with two processes sharing the stream
//     through the DynamoDB lease store.
//   - pipeline_test.go: E2E_ITEMS (default 50,000) expired items reach both
//     S3 and JetStream at once; user deletes reach neither.
//   - faults_test.go: engine throttling, trimmed data, expired iterators,
//     shard splits, a failing sink and a throttled lease table; nothing is
//     lost.
package e2e
