package eventually

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test: the fault Wait must
// report cannot be produced on a real testing.T without failing it.
type fakeT struct{ failed string }

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestWait(t *testing.T) {
	for _, c := range []struct {
		name     string
		f        func(calls int) error
		wantFail string // "" when Wait must return
	}{
		{"at once", func(int) error { return nil }, ""},
		{"after a few looks", func(n int) error {
			if n < 3 {
				return errors.New("not yet")
			}
			return nil
		}, ""},
		{"never", func(int) error { return errors.New("3 of 5 missing") }, "items: not within 50ms: 3 of 5 missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft := &fakeT{}
			calls := 0
			Wait(ft, 50*time.Millisecond, "items", func() error { calls++; return c.f(calls) })
			if ft.failed != c.wantFail {
				t.Errorf("failure %q, want %q", ft.failed, c.wantFail)
			}
		})
	}
}

func TestTrue(t *testing.T) {
	ft := &fakeT{}
	True(ft, 30*time.Millisecond, "the flag", func() bool { return false })
	if !strings.HasPrefix(ft.failed, "the flag: not within 30ms: ") {
		t.Errorf("failure %q", ft.failed)
	}
	ft = &fakeT{}
	n := 0
	True(ft, time.Minute, "the flag", func() bool { n++; return n > 2 })
	if ft.failed != "" || n != 3 {
		t.Errorf("failure %q after %d looks, want none after 3", ft.failed, n)
	}
}
