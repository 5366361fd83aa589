package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
)

// TakeHiddenFlag removes the flag name ("--name FILE", "--name=FILE" or the
// same with one dash) from args and returns the rest and its value. It is
// for developer flags that `--help` does not list: `archiver engine
// --cpuprofile FILE`, which `make bench` uses to profile the engine under
// load.
func TakeHiddenFlag(args []string, name string) (rest []string, value string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), value, nil
		}
		f := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		switch {
		case f == a:
			rest = append(rest, a) // not a flag
		case f == name:
			if i+1 == len(args) {
				return nil, "", fmt.Errorf("flag needs an argument: --%s", name)
			}
			value = args[i+1]
			i++
		case strings.HasPrefix(f, name+"="):
			value = f[len(name)+1:]
		default:
			rest = append(rest, a)
		}
	}
	return rest, value, nil
}

// StartCPUProfile writes a CPU profile to file ("" is none) until the
// returned function is called.
func StartCPUProfile(file string) (stop func(), err error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
