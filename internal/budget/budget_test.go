package budget

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestTryAcquire(t *testing.T) {
	b := New(100)
	if b.TryAcquire(60) != nil || b.TryAcquire(40) != nil {
		t.Fatal("requests within the budget refused")
	}
	ch := b.TryAcquire(1)
	if ch == nil {
		t.Fatal("a request past the budget admitted")
	}
	b.Release(50)
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal("Release did not wake the waiter")
	}
	if b.Used() != 50 {
		t.Fatalf("Used = %d, want 50 (a refused request takes nothing)", b.Used())
	}
}

func TestOversizedRequestGoesAlone(t *testing.T) {
	b := New(10)
	if b.TryAcquire(1000) != nil {
		t.Fatal("an oversized request with nothing held must be admitted")
	}
	if b.TryAcquire(1) == nil {
		t.Fatal("a request beside an oversized one must wait")
	}
}

func TestAcquireCallsOnWaitOnceAndHonoursContext(t *testing.T) {
	b := New(10)
	_ = b.TryAcquire(10)
	calls := 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(ctx, 5, func() { calls++ }); err != context.DeadlineExceeded {
		t.Fatalf("Acquire = %v, want the context's error", err)
	}
	if calls != 1 {
		t.Fatalf("onWait called %d times, want 1", calls)
	}
}

func TestWaitAdd(t *testing.T) {
	b := New(10)
	b.Add(25) // past the limit: Add never refuses
	done := make(chan error)
	go func() { done <- b.Wait(context.Background()) }()
	b.Release(20)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestConcurrent: many goroutines acquire and release; the budget never
// holds more than its max (one oversized request aside) and ends at zero.
func TestConcurrent(t *testing.T) {
	const max = 64
	b := New(max)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				n := int64(1 + (g+i)%max)
				if err := b.Acquire(context.Background(), n, nil); err != nil {
					t.Error(err)
					return
				}
				if u := b.Used(); u > max {
					t.Errorf("holds %d of %d", u, max)
				}
				b.Release(n)
			}
		}()
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Fatalf("Used = %d at the end", b.Used())
	}
}

func ExampleBudget() {
	b := New(1 << 20) // 1 MiB in flight
	ctx := context.Background()
	if err := b.Acquire(ctx, 300<<10, nil); err != nil {
		return
	}
	fmt.Println("held", b.Used())
	b.Release(300 << 10)
	fmt.Println("held", b.Used())
	// Output:
	// held 307200
	// held 0
}
