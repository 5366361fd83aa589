// Package housetest holds tests of the module's layout, read from its source
// files with go/parser rather than from any package's API:
//
//   - TestInternalImportsOnlyInternal: the packages under internal/ are
//     leaves; their non-test files import no top-level package of this
//     module (commands such as cmd/bench live under cmd/).
//   - TestLongFunctions: the delivery core and the tools over it (shard,
//     consumer, sinks, checkpoint, event, sweep, archive, restore) hold at
//     most maxLongFuncs functions over maxFuncLines lines in their non-test
//     files; the test lists them when there are more.
//
// The package has no code of its own.
package housetest
