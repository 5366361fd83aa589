package benchkit

import (
	"errors"
	"sync"
)

// Paired runs measure for both sides of a comparison (on and off) in each
// of rounds rounds, the order alternating (round 0 on first), one after
// the other or, together, both at once (the machine's load then hits both
// alike), and returns each side's figure by round. started, when not nil,
// is told each run as it starts.
func Paired(rounds int, together bool, started func(round int, on bool), measure func(round int, on bool) (float64, error)) (on, off []float64, err error) {
	for round := range rounds {
		order := [2]bool{round%2 == 0, round%2 == 1}
		var v [2]float64
		var errs [2]error
		var wg sync.WaitGroup
		for i, m := range order {
			if started != nil {
				started(round, m)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				v[i], errs[i] = measure(round, m)
			}()
			if !together {
				wg.Wait()
			}
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return nil, nil, err
		}
		for i, m := range order {
			if m {
				on = append(on, v[i])
			} else {
				off = append(off, v[i])
			}
		}
	}
	return on, off, nil
}
