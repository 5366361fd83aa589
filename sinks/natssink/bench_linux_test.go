package natssink

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU is the CPU time (user + system) of the calling OS thread; a
// benchmark locks its goroutine to its thread around it (lockThread), so
// the figure is the benchmark's own work, whatever else runs in the
// process (the embedded nats-server, the client's flusher) or on the
// machine.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lockThread locks the calling goroutine to its OS thread and returns the
// unlock.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
