package benchkit

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (sysconf(_SC_CLK_TCK), 100 on every Linux architecture Go runs on).
const clockTicks = 100

// Settle collects the garbage that building a phase's input left behind,
// so that the collection does not run inside the next timed phase (which
// would charge setup to whichever of baseline or subject runs after it).
// testing.B does the same before every benchmark.
func Settle() { runtime.GC() }

// SelfCPU is this process's CPU time so far (user + system, all threads),
// 0 when getrusage fails.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcCPU is a live process's CPU time so far (user + system, all
// threads) from /proc/PID/stat; -1 and the reason when /proc cannot tell.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1, err
	}
	// Field 2, the command name, may hold spaces and parentheses: count
	// fields after its closing parenthesis, from field 3 (state) on.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return -1, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, b)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// ProcKiB reads one "kB" field of /proc/PID/status (VmRSS, VmHWM), or -1
// when /proc cannot tell.
func ProcKiB(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb
			}
		}
	}
	return -1
}

// PeakRSSMiB is a live process's peak resident set (VmHWM) in MiB, or -1
// when /proc cannot tell.
func PeakRSSMiB(pid int) int64 {
	if kb := ProcKiB(pid, "VmHWM"); kb >= 0 {
		return kb / 1024
	}
	return -1
}

// SelfKiB reads a field of this process's /proc status after a
// collection that hands freed memory back to the OS.
func SelfKiB(field string) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return max(ProcKiB(os.Getpid(), field), 0)
}

// LoadAvg is the machine's load average over 1, 5 and 15 minutes, or "?".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
