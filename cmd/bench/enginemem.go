package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The engine's memory: resident memory (VmRSS from /proc/PID/status) of
// the engine and of Dynoxide, each its own process, at idle and as the same
// items are written to both; and the peak resident memory (VmHWM) of an
// engine starting from a --data-dir that holds 1,000,000 items, against the
// resident memory of the in-memory engine holding the same items.
const (
	memStep  = 100_000   // items per step of the per-100,000 figure
	memItems = 1_000_000 // items of the start-up figure
)

// runEngineMemBench writes the same items to the engine in memory and to
// Dynoxide, reading their resident memory at idle, after memStep items and
// (the engine) after memItems; then writes memItems items to an engine
// with --data-dir, stops it (it snapshots), starts it again and reads its
// peak once it answers.
func runEngineMemBench(ctx context.Context, w io.Writer) error {
	tmp, err := os.MkdirTemp("", "ttl-bench-mem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	archiver, _, err := buildServers(ctx, tmp)
	if err != nil {
		return err
	}
	engineCmd := func(args ...string) func(int) (*exec.Cmd, error) {
		return func(port int) (*exec.Cmd, error) {
			return exec.Command(archiver, append([]string{"engine", "--listen", loopback(port), "--ttl-interval=-1s", "--log-level", "warn"}, args...)...), nil
		}
	}
	fmt.Fprintf(w, "  resident memory, each server its own process (VmRSS, VmHWM from /proc/PID/status), items of %d bytes of payload written with BatchWriteItem over plain HTTP; table pk+sk, no stream, no index:\n", benchPayload)
	mem, err := startServerProc(ctx, "engine", engineCmd())
	if err != nil {
		return fmt.Errorf("engine process: %w", err)
	}
	defer mem.stop()
	inMemory, err := memGrowth(ctx, w, mem, memItems)
	if err != nil {
		return err
	}
	if dyn, err := startServerProc(ctx, "dynoxide", startDynoxide); err != nil {
		fmt.Fprintf(w, "  dynoxide: n/a (%v)\n", err)
	} else {
		_, err := memGrowth(ctx, w, dyn, memStep)
		dyn.stop()
		if err != nil {
			return err
		}
	}
	return memStartup(ctx, w, engineCmd, filepath.Join(tmp, "data"), inMemory)
}

// memGrowth creates the bench table on s and writes items 0..n-1, printing
// its resident memory at idle, after memStep items and, when n is larger,
// after n. It returns the last reading (KiB).
func memGrowth(ctx context.Context, w io.Writer, s *serverProc, n int) (int64, error) {
	idle := procKiB(s.cmd.Process.Pid, "VmRSS")
	if err := s.createTable(ctx); err != nil {
		return 0, fmt.Errorf("%s: %w", s.name, err)
	}
	steps := []int{memStep}
	if n > memStep {
		steps = append(steps, n)
	}
	var rss int64
	from := 0
	for _, upto := range steps {
		if err := s.batchPut(ctx, from, upto); err != nil {
			return 0, fmt.Errorf("%s: writing %d items: %w", s.name, upto, err)
		}
		from = upto
		rss = procKiB(s.cmd.Process.Pid, "VmRSS")
		fmt.Fprintf(w, "  %-8s %9d items: RSS %5d MiB, %5.1f MiB per 100,000 items over idle (%d MiB idle)\n",
			s.name, upto, rss/1024, float64(rss-idle)/1024*memStep/float64(upto), idle/1024)
	}
	return rss, nil
}

// memStartup writes memItems items to an engine on dataDir, stops it with
// SIGINT (it writes a snapshot on the way out), starts it again on the same
// directory and prints its peak resident memory once it answers, against
// inMemory, the in-memory engine's resident memory with the same items.
func memStartup(ctx context.Context, w io.Writer, engineCmd func(...string) func(int) (*exec.Cmd, error), dataDir string, inMemory int64) error {
	disk, err := startServerProc(ctx, "engine --data-dir", engineCmd("--data-dir", dataDir))
	if err != nil {
		return fmt.Errorf("engine --data-dir process: %w", err)
	}
	err = disk.createTable(ctx)
	if err == nil {
		err = disk.batchPut(ctx, 0, memItems)
	}
	written := procKiB(disk.cmd.Process.Pid, "VmHWM")
	disk.stop()
	if err != nil {
		return fmt.Errorf("engine --data-dir: %w", err)
	}
	again, err := startServerProc(ctx, "engine --data-dir (restarted)", engineCmd("--data-dir", dataDir))
	if err != nil {
		return fmt.Errorf("restarting the engine on its data directory: %w", err)
	}
	defer again.stop()
	peak, rss := procKiB(again.cmd.Process.Pid, "VmHWM"), procKiB(again.cmd.Process.Pid, "VmRSS")
	fmt.Fprintf(w, "  start-up from --data-dir with %d items (snapshot): peak %d MiB (VmHWM once it answers), RSS %d MiB; %.2fx the in-memory engine's RSS with the same items (%d MiB; target <= 2x); the process that wrote them peaked at %d MiB\n",
		memItems, peak/1024, rss/1024, float64(peak)/float64(inMemory), inMemory/1024, written/1024)
	return nil
}

// batchPut writes items from..to-1 with BatchWriteItem (25 a request) from
// benchClients clients: the items putOne writes, in bulk. An item handed
// back unprocessed is an error: every server must hold every item.
func (s *serverProc) batchPut(ctx context.Context, from, to int) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, benchClients)
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b []byte
			for ctx.Err() == nil {
				base := int(next.Add(25) - 25)
				if base >= to {
					return
				}
				b = append(b[:0], `{"RequestItems":{"cpu":[`...)
				for k := base; k < min(base+25, to); k++ {
					if k > base {
						b = append(b, ',')
					}
					b = fmt.Appendf(b, `{"PutRequest":{"Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"}}}}`,
						benchPartition(k), k, payload, k*7)
				}
				b = append(b, "]}}"...)
				out, err := s.post(ctx, "BatchWriteItem", b)
				if err == nil && bytes.Contains(out, []byte(`"PutRequest"`)) {
					err = fmt.Errorf("items handed back unprocessed: %.200s", out)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// procKiB reads one "kB" field of /proc/PID/status (VmRSS, VmHWM), or -1
// when /proc cannot tell.
func procKiB(pid int, field string) int64 {
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
