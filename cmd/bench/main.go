// Command bench prints the performance figures of `make bench`: every
// figure beside a baseline measured in the same run on the same machine, as
// a ratio, so that numbers from different machines can be compared.
//
// Each section (engine, consumer, sinks, pipeline, ...) is in files named
// for what it measures; the machinery they share (paired rounds and their
// statistics, /proc readings, the servers a section starts) is in
// internal/benchkit. With -tiny every section runs once at a tiny size:
// its figures mean nothing, but it proves the section still runs, which
// TestSectionsTiny checks in `make test`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strings"
)

// section is one part of the bench.
type section struct {
	name string
	// run measures and prints the section's figures to w; tiny runs it
	// once at a tiny size.
	run func(ctx context.Context, w io.Writer, tiny bool) error
	// named: runs only when -only names it (a part of another section,
	// runnable alone)
	named bool
}

// sections are the bench's sections in the order they run.
func sections() []section {
	return []section{
		{"engine", runEngineBench, false},
		{"engine-mem", runEngineMemBench, false},
		{"consumer", runConsumerBench, false},
		{"sinks", runSinksBench, false},
		{"pipeline", runPipelineBench, false},
		{"manifests", runManifestsBench, false},
		{"nats-formats", runNATSFormatsBench, false},
		{"sweep", runSweepBench, false},
		{"archive", runArchiveBench, false},
		{"restore", runRestoreBench, false},
		{"engine-cpu", runServerCPUBench, true},
	}
}

func main() {
	only := flag.String("only", "", "comma-separated benches to run (engine, consumer, sinks, pipeline, manifests, nats-formats, sweep, archive, restore, engine-mem; engine-cpu: only the engine's server-CPU part); default all but engine-cpu")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	tiny := flag.Bool("tiny", false, "run each section once at a tiny size (its figures mean nothing: it checks that the bench still runs)")
	child := flag.Bool("child", false, "internal: this process runs one bench for a parent")
	flag.Parse()
	if *cpuprofile != "" {
		stop, err := startProfile(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	chosen := choose(sections(), *only)
	// Each bench runs in a process of its own (unless one profile must
	// cover them all): the engine bench leaves a process that held 1.3 GiB,
	// and the runtime handing that memory back and the next bench faulting
	// it in again should not be charged to the next bench.
	isolate := len(chosen) > 1 && *cpuprofile == ""
	failed := false
	for _, s := range chosen {
		if !*child {
			fmt.Printf("== %s\n", s.name)
		}
		var err error
		if isolate {
			err = runAlone(ctx, s.name, *tiny)
		} else {
			err = s.run(ctx, os.Stdout, *tiny)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", s.name, err)
			failed = true
		}
	}
	if failed {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// choose returns the sections only names (comma-separated), or with only
// empty every section not named.
func choose(all []section, only string) []section {
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var chosen []section
	for _, s := range all {
		if (len(want) == 0 && !s.named) || want[s.name] {
			chosen = append(chosen, s)
		}
	}
	return chosen
}

// startProfile starts a CPU profile of this process into file.
func startProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	return pprof.StopCPUProfile, nil
}

// runAlone runs one bench in a new process of this binary.
func runAlone(ctx context.Context, name string, tiny bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"-only", name, "-child"}
	if tiny {
		args = append(args, "-tiny")
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}
