package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestPrintSummary: the summary's lags are numbers only when some expiry
// was measured; with none (stopped before anything expired) they say n/a,
// never a zero that reads as a measurement.
func TestPrintSummary(t *testing.T) {
	const na = "n/a (no expiry arrived before the stop)"
	for _, tc := range []struct {
		name        string
		sum         Summary
		lag, onNATS string
		pending     bool
	}{
		{name: "nothing expired", sum: Summary{ExpiringWritten: 4, UserDeletes: 1},
			lag: na, onNATS: na, pending: true},
		{name: "nothing written", lag: na, onNATS: na},
		{name: "expiries measured", sum: Summary{ExpiringWritten: 4, Published: 4, Archived: 4, Measured: 4,
			LagP50: 1500 * time.Millisecond, LagMax: 2 * time.Second, NATSP50: 1600 * time.Millisecond, NATSMax: 2100 * time.Millisecond},
			lag: "1.5s / 2s (deletion time - ExpirationTime)", onNATS: "1.6s / 2.1s after ExpirationTime"},
		{name: "measured lags of zero", sum: Summary{ExpiringWritten: 1, Published: 1, Measured: 1},
			lag: "0s / 0s (deletion time - ExpirationTime)", onNATS: "0s / 0s after ExpirationTime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			PrintSummary(&b, &tc.sum)
			out := b.String()
			for _, want := range []string{
				"TTL lag p50/max:      " + tc.lag + "\n",
				"on NATS p50/max:      " + tc.onNATS + "\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("summary lacks %q:\n%s", want, out)
				}
			}
			if got := strings.Contains(out, "not yet expired when stopped"); got != tc.pending {
				t.Errorf("summary says sessions pending: %v, want %v:\n%s", got, tc.pending, out)
			}
		})
	}
}

func TestStopHint(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                "Press Ctrl-C to stop",
		10 * time.Second: "Stops by itself after 10s (Ctrl-C stops it sooner)",
	} {
		if got := stopHint(d); !strings.Contains(got, want) {
			t.Errorf("stopHint(%s) = %q, want it to say %q", d, got, want)
		}
	}
}
