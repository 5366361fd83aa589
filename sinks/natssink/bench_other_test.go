//go:build !linux

package natssink

import "time"

// threadCPU is 0 where the OS has no per-thread CPU time (see the Linux
// file): the benchmarks then report no CPU figure.
func threadCPU() time.Duration { return 0 }

func lockThread() func() { return func() {} }
