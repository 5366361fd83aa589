// Command bench prints the performance figures of `make bench`: every
// figure beside a baseline measured in the same run on the same machine, as
// a ratio, so that numbers from different machines can be compared.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
)

type bench struct {
	name string
	run  func(ctx context.Context, w io.Writer) error
	// named: runs only when -only names it (a part of another bench,
	// runnable alone)
	named bool
}

func main() {
	only := flag.String("only", "", "comma-separated benches to run (engine, consumer, sinks, pipeline, manifests, nats-formats, sweep, archive, restore, engine-mem; engine-cpu: only the engine's server-CPU part); default all but engine-cpu")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	child := flag.Bool("child", false, "internal: this process runs one bench for a parent")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	benches := []bench{
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
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var chosen []bench
	for _, b := range benches {
		if (len(want) == 0 && !b.named) || want[b.name] {
			chosen = append(chosen, b)
		}
	}
	// Each bench runs in a process of its own (unless one profile must
	// cover them all): the engine bench leaves a process that held 1.3 GiB,
	// and the runtime handing that memory back and the next bench faulting
	// it in again should not be charged to the next bench.
	isolate := len(chosen) > 1 && *cpuprofile == ""
	failed := false
	for _, b := range chosen {
		if !*child {
			fmt.Printf("== %s\n", b.name)
		}
		if isolate {
			if err := runAlone(ctx, b.name); err != nil {
				fmt.Fprintf(os.Stderr, "bench %s: %v\n", b.name, err)
				failed = true
			}
			continue
		}
		if err := b.run(ctx, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", b.name, err)
			failed = true
		}
	}
	if failed {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// runAlone runs one bench in a new process of this binary.
func runAlone(ctx context.Context, name string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "-only", name, "-child")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// settle collects the garbage that building a phase's input left behind,
// so that the collection does not run inside the next timed phase (which
// would charge setup to whichever of baseline or subject runs after it).
// testing.B does the same before every benchmark.
func settle() { runtime.GC() }
