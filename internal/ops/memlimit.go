package ops

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// CgroupMemoryFiles are where Linux exposes a container's memory limit
// (cgroup v2, then v1).
var CgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// ContainerMemoryLimit returns the memory limit of the container the process
// runs in, read from the first of files that holds a number (0 when there
// is none, or it is "max" or absurdly large, meaning unlimited).
func ContainerMemoryLimit(files []string) int64 {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}

// SetMemoryLimitFromContainer sets the Go runtime's soft memory limit to
// 85 % of the container's limit (an ECS task's memory) unless GOMEMLIMIT is
// set, so the garbage collector works harder before the kernel OOM-kills
// the task. It returns the limit it set, or 0.
func SetMemoryLimitFromContainer(getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := ContainerMemoryLimit(CgroupMemoryFiles)
	if limit == 0 {
		return 0
	}
	soft := limit / 100 * 85
	debug.SetMemoryLimit(soft)
	return soft
}
