//go:build race

package e2e

// raceEnabled: the race detector slows the engine about tenfold, so the
// heaviest defaults shrink under it (see pipelineItems).
const raceEnabled = true
