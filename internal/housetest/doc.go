// Package housetest holds tests of the module's layout, read from its source
// files with go/parser rather than from any package's API:
//
//   - TestInternalImportsOnlyInternal: the packages under internal/ are
//     leaves; their non-test files import no top-level package of this
//     module (commands such as cmd/bench live under cmd/).
//   - TestImportRules: the import direction of docs/DESIGN.md holds where
//     a package could easily break it: checkpoint imports no lease (nor
//     sweep), lease no checkpoint, sweep, consumer or sinks, sweep/state
//     not sweep (importRules).
//   - TestLongFunctions: the delivery core and the tools over it (shard,
//     consumer, sinks, checkpoint, lease, internal/leasetable, event,
//     sweep, archive, restore), the engine (engine/ with its internal
//     packages and enginetest), conformance, the bench (cmd/bench with
//     internal/benchkit) and the engine's command line (cmd/internal,
//     cmd/archiver-engine) hold at
//     most maxLongFuncs functions over maxFuncLines lines in their non-test
//     files; the test lists them when there are more.
//   - TestE2EIsTestOnly: e2e, the end-to-end tests, holds only doc.go and
//     _test.go files, and no package imports it.
//   - TestNATSServerStarters: tests start a nats-server only through
//     internal/natstest (at most maxTestNATSStarters files of test code
//     start one); the programs that run one for a user (demo, cmd/bench)
//     are named in natsStarters.
//
// and of a binary's build, read from `go list -deps`:
//
//   - TestSlimEngineLinksNoArchiver: cmd/archiver-engine links no AWS SDK,
//     NATS, Prometheus, protobuf or Parquet package, and of this module
//     only the engine, its command line (cmd/internal/enginecmd,
//     cmd/internal/cli) and the leaves internal/logging and
//     internal/suggest: their inits would cost its idle memory.
//
// and of what git tracks:
//
//   - TestNoExecutablesCommitted: no tracked file is a compiled program
//     (ELF, Mach-O or PE), as a `go build` in a command's folder leaves.
//
// and of its documentation, read as text:
//
//   - TestReadmeShape: README.md, written for users, has at most
//     readmeMaxLines lines, shows `make run` and `make test` in its first
//     readmeFirstLines, and starts no program with `go run … &`.
//   - TestDocLinks: every relative link of README.md, docs/*.md and
//     deploy's READMEs names a file that exists, and a heading of it when
//     it has an anchor.
//
// The package has no code of its own.
package housetest
