package backoff

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestDelayStaysInItsStep(t *testing.T) {
	tests := []struct {
		p        Policy
		n        int
		min, max time.Duration
	}{
		{Policy{100 * time.Millisecond, 30 * time.Second}, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{Policy{100 * time.Millisecond, 30 * time.Second}, 3, 400 * time.Millisecond, 800 * time.Millisecond},
		{Policy{100 * time.Millisecond, 30 * time.Second}, 20, 15 * time.Second, 30 * time.Second},
		{Policy{100 * time.Millisecond, 30 * time.Second}, 1 << 30, 15 * time.Second, 30 * time.Second}, // no overflow
		{Policy{time.Second, 0}, 5, 500 * time.Millisecond, time.Second},                                // Max below Min
		{Policy{0, time.Second}, 3, 0, 0},
		{Policy{1, 1}, 0, 1, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/%d", tc.p, tc.n), func(t *testing.T) {
			for i := 0; i < 200; i++ {
				if d := tc.p.Delay(tc.n); d < tc.min || d > tc.max {
					t.Fatalf("Delay(%d) = %v, want within [%v, %v]", tc.n, d, tc.min, tc.max)
				}
			}
		})
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a full wait reported as cut short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) || Sleep(ctx, 0) {
		t.Fatal("a cancelled wait reported as complete")
	}
}

func ExamplePolicy() {
	p := Policy{Min: 100 * time.Millisecond, Max: 30 * time.Second}
	for _, n := range []int{0, 1, 2, 10} {
		fmt.Println(n, p.Step(n))
	}
	// Output:
	// 0 100ms
	// 1 200ms
	// 2 400ms
	// 10 30s
}
