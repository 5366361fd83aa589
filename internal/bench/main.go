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
	"os/signal"
	"runtime/pprof"
	"strings"
)

type bench struct {
	name string
	run  func(ctx context.Context, w io.Writer) error
}

func main() {
	only := flag.String("only", "", "comma-separated benches to run (engine, consumer, sinks, pipeline); default all")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
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
		{"engine", runEngineBench},
		{"consumer", runConsumerBench},
		{"sinks", runSinksBench},
		{"pipeline", runPipelineBench},
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	failed := false
	for _, b := range benches {
		if len(want) > 0 && !want[b.name] {
			continue
		}
		fmt.Printf("== %s\n", b.name)
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
