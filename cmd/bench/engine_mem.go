package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
)

// The engine's memory: resident memory (VmRSS from /proc/PID/status) of
// the engine and of Dynoxide, each its own process, at idle and as the same
// items are written to both; and the peak resident memory (VmHWM) of an
// engine starting from a --data-dir that holds 1,000,000 items, against the
// resident memory of the in-memory engine holding the same items. Then issue
// 30's measure: the same 50,000 items of streamPayload bytes written to a
// table with a stream on, in a fresh engine and a fresh Dynoxide in one run,
// read as VmRSS and as RssAnon (VmRSS less the clean pages of the binary and
// its libraries). The engine is archiver-engine, the slim binary a test job
// starts (both binaries built as `make build` builds them); `archiver
// engine`, the same engine in the full binary, is read idle beside it.

// streamPayload is the payload of the side-by-side table's items.
const streamPayload = 250

// memSizes are the memory bench's sizes.
type memSizes struct {
	step  int // items of the first reading (100,000: the per-100,000 figure)
	items int // items of the start-up figure
	// stream: items of the side-by-side table with a stream on (issue
	// 30's 50,000), streamPayload bytes of payload each.
	stream int
	// install: Dynoxide is installed with npm when it is missing.
	install bool
}

func memSizesFor(tiny bool) memSizes {
	if tiny {
		return memSizes{step: 1000, items: 2000, stream: 1000}
	}
	return memSizes{step: 100_000, items: 1_000_000, stream: 50_000, install: true}
}

// runEngineMemBench writes the same items to the engine in memory and to
// Dynoxide, reading their resident memory at idle, after sz.step items and
// (the engine) after sz.items; then writes sz.items items to an engine
// with --data-dir, stops it (it snapshots), starts it again and reads its
// peak once it answers.
func runEngineMemBench(ctx context.Context, w io.Writer, tiny bool) error {
	sz := memSizesFor(tiny)
	tmp, err := os.MkdirTemp("", "ttl-bench-mem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	full, err := benchkit.BuildArchiver(ctx, tmp)
	if err != nil {
		return err
	}
	slim, err := benchkit.BuildEngine(ctx, tmp)
	if err != nil {
		return err
	}
	engineCmd := func(args ...string) func(int) (*exec.Cmd, error) {
		return func(port int) (*exec.Cmd, error) {
			return exec.Command(slim, append([]string{"--listen", loopback(port), "--ttl-interval=-1s", "--log-level", "warn"}, args...)...), nil
		}
	}
	fullEngine := func(port int) (*exec.Cmd, error) {
		return exec.Command(full, "engine", "--listen", loopback(port), "--ttl-interval=-1s", "--log-level", "warn"), nil
	}
	fmt.Fprintf(w, "  resident memory, each server its own process (VmRSS, VmHWM from /proc/PID/status), items of %d bytes of payload written with BatchWriteItem over plain HTTP; table pk+sk, no stream, no index:\n", benchPayload)
	mem, err := startServerProc(ctx, "engine", engineCmd())
	if err != nil {
		return fmt.Errorf("engine process: %w", err)
	}
	defer mem.stop()
	inMemory, err := memGrowth(ctx, w, mem, sz.step, sz.items)
	if err != nil {
		return err
	}
	dynoxide := func(port int) (*exec.Cmd, error) { return startDynoxide(port, sz.install) }
	if dyn, err := startServerProc(ctx, "dynoxide", dynoxide); err != nil {
		fmt.Fprintf(w, "  dynoxide: n/a (%v)\n", err)
	} else {
		_, err := memGrowth(ctx, w, dyn, sz.step, sz.step)
		dyn.stop()
		if err != nil {
			return err
		}
	}
	if err := memStartup(ctx, w, engineCmd, filepath.Join(tmp, "data"), sz.items, inMemory); err != nil {
		return err
	}
	return memSideBySide(ctx, w, []memServer{{name: "engine", cmd: engineCmd()}, {name: "archiver engine", cmd: fullEngine, idleOnly: true},
		{name: "dynoxide", cmd: dynoxide}}, sz.stream)
}

// memServer is a server of the side-by-side: its name on the table, the
// command that starts it on a port, and whether it is read idle only
// (`archiver engine`: the engine's heap is the slim binary's).
type memServer struct {
	name     string
	cmd      func(int) (*exec.Cmd, error)
	idleOnly bool
}

// memSideBySide starts each server in a fresh process, in order, reads its
// idle VmRSS and RssAnon before CreateTable, and unless it is idleOnly
// creates the bench table with a stream (both images), writes items
// 0..n-1 with streamPayload bytes of payload and prints both readings per
// 100,000 items over idle.
func memSideBySide(ctx context.Context, w io.Writer, servers []memServer, n int) error {
	fmt.Fprintf(w, "  side by side (issue 30): %d items of %d bytes of payload, stream on (NEW_AND_OLD_IMAGES), a fresh process each; engine is archiver-engine, archiver engine the full binary (idle only); RssAnon is VmRSS less the binary's clean pages; target: engine idle <= 12 MiB VmRSS, per 100,000 <= Dynoxide's\n", n, streamPayload)
	fmt.Fprintf(w, "  %-15s %12s %12s %22s %22s\n", "server", "idle VmRSS", "idle RssAnon", "VmRSS per 100,000", "RssAnon per 100,000")
	pad := strings.Repeat("x", streamPayload)
	for _, sv := range servers {
		s, err := startServerProc(ctx, sv.name, sv.cmd)
		if err != nil {
			fmt.Fprintf(w, "  %-15s n/a (%v)\n", sv.name, err)
			continue
		}
		pid := s.cmd.Process.Pid
		idle, idleAnon := benchkit.ProcKiB(pid, "VmRSS"), benchkit.ProcKiB(pid, "RssAnon")
		if sv.idleOnly {
			s.stop()
			fmt.Fprintf(w, "  %-15s %8.1f MiB %8.1f MiB %22s %22s\n", sv.name, float64(idle)/1024, float64(idleAnon)/1024, "-", "-")
			continue
		}
		err = s.createTableWith(ctx, streamSpec)
		if err == nil {
			err = s.batchPutPayload(ctx, 0, n, pad)
		}
		rss, anon := benchkit.ProcKiB(pid, "VmRSS"), benchkit.ProcKiB(pid, "RssAnon")
		s.stop()
		if err != nil {
			return fmt.Errorf("%s, stream on: %w", sv.name, err)
		}
		per := func(after, before int64) float64 { return float64(after-before) / 1024 * 100_000 / float64(n) }
		fmt.Fprintf(w, "  %-15s %8.1f MiB %8.1f MiB %18.1f MiB %18.1f MiB\n",
			sv.name, float64(idle)/1024, float64(idleAnon)/1024, per(rss, idle), per(anon, idleAnon))
	}
	return nil
}

// memGrowth creates the bench table on s and writes items 0..n-1, printing
// its resident memory at idle, after step items and, when n is larger,
// after n. It returns the last reading (KiB).
func memGrowth(ctx context.Context, w io.Writer, s *serverProc, step, n int) (int64, error) {
	idle := benchkit.ProcKiB(s.cmd.Process.Pid, "VmRSS")
	if err := s.createTable(ctx); err != nil {
		return 0, fmt.Errorf("%s: %w", s.name, err)
	}
	steps := []int{step}
	if n > step {
		steps = append(steps, n)
	}
	var rss int64
	from := 0
	for _, upto := range steps {
		if err := s.batchPut(ctx, from, upto); err != nil {
			return 0, fmt.Errorf("%s: writing %d items: %w", s.name, upto, err)
		}
		from = upto
		rss = benchkit.ProcKiB(s.cmd.Process.Pid, "VmRSS")
		fmt.Fprintf(w, "  %-8s %9d items: RSS %5d MiB, %5.1f MiB per 100,000 items over idle (%d MiB idle)\n",
			s.name, upto, rss/1024, float64(rss-idle)/1024*100_000/float64(upto), idle/1024)
	}
	return rss, nil
}

// memStartup writes n items to an engine on dataDir, stops it with
// SIGINT (it writes a snapshot on the way out), starts it again on the same
// directory and prints its peak resident memory once it answers, against
// inMemory, the in-memory engine's resident memory with the same items.
func memStartup(ctx context.Context, w io.Writer, engineCmd func(...string) func(int) (*exec.Cmd, error), dataDir string, n int, inMemory int64) error {
	disk, err := startServerProc(ctx, "engine --data-dir", engineCmd("--data-dir", dataDir))
	if err != nil {
		return fmt.Errorf("engine --data-dir process: %w", err)
	}
	err = disk.createTable(ctx)
	if err == nil {
		err = disk.batchPut(ctx, 0, n)
	}
	written := benchkit.ProcKiB(disk.cmd.Process.Pid, "VmHWM")
	disk.stop()
	if err != nil {
		return fmt.Errorf("engine --data-dir: %w", err)
	}
	again, err := startServerProc(ctx, "engine --data-dir (restarted)", engineCmd("--data-dir", dataDir))
	if err != nil {
		return fmt.Errorf("restarting the engine on its data directory: %w", err)
	}
	defer again.stop()
	peak, rss := benchkit.ProcKiB(again.cmd.Process.Pid, "VmHWM"), benchkit.ProcKiB(again.cmd.Process.Pid, "VmRSS")
	fmt.Fprintf(w, "  start-up from --data-dir with %d items (snapshot): peak %d MiB (VmHWM once it answers), RSS %d MiB; %.2fx the in-memory engine's RSS with the same items (%d MiB; target <= 2x); the process that wrote them peaked at %d MiB\n",
		n, peak/1024, rss/1024, float64(peak)/float64(inMemory), inMemory/1024, written/1024)
	return nil
}
