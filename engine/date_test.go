package engine_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/engine"
)

// TestDateHeaderFollowsTheClock: the Date header of DynamoDB responses is
// the engine's clock, as DynamoDB's is its own, so a client that checks
// its clock against the server's (archiver sweep) can be tested by moving
// the engine's clock; on real time it is net/http's.
func TestDateHeaderFollowsTheClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		want func(*env) time.Time // nil: real time
	}{
		{"manual", func(e *env) time.Time { return e.clock.Now() }},
		{"real", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := engine.Options{}
			if tc.want == nil {
				o.Clock = wallClock{}
			}
			e := newEnv(t, o)
			if tc.want != nil {
				e.clock.Set(t0.Add(90*time.Minute + 1500*time.Millisecond))
			}
			req, err := http.NewRequest("POST", e.srv.Endpoint(), strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
			req.Header.Set("Content-Type", "application/x-amz-json-1.0")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got, err := http.ParseTime(resp.Header.Get("Date"))
			if err != nil {
				t.Fatalf("Date %q: %v", resp.Header.Get("Date"), err)
			}
			if tc.want != nil {
				if want := tc.want(e).Truncate(time.Second); !got.Equal(want) {
					t.Fatalf("Date %v, want the engine's clock %v", got, want)
				}
			} else if time.Since(got).Abs() > time.Minute {
				t.Fatalf("Date %v on real time, far from now", got)
			}
		})
	}
}
