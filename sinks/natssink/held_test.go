package natssink

import (
	"bytes"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
)

// TestNATSMessagesHeldPastTheirBatch: Write renders a batch's payloads,
// key headers and encoded ce- values into one arena and its header values
// into one backing array, which messages point into. A message held past
// its batch (awaiting its acknowledgement, or published again) must stay
// byte for byte what was rendered, while its batch renders on past the
// room it was sized for and later batches render on other goroutines; run
// under -race.
func TestNATSMessagesHeldPastTheirBatch(t *testing.T) {
	for _, format := range natsmsg.Formats {
		t.Run(format, func(t *testing.T) {
			tmpl, err := parseSubject("archiver.{table}.{kind}")
			if err != nil {
				t.Fatal(err)
			}
			s := &Sink{tmpl: tmpl, c: Config{Format: format}}
			evs := testkit.Events("sessions", "shard-1", 1, 40)
			var held []*nats.Msg
			r := s.newRender(evs)
			for i := range evs {
				m, _ := r.message(&evs[i])
				held = append(held, m)
			}
			// What each message must still say: rendered afresh, in
			// buffers of their own.
			want := make([]*nats.Msg, len(evs))
			for i := range evs {
				want[i] = s.message(&evs[i])
			}
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					later := testkit.Events("sessions", "shard-1", 1000*(g+1), 200)
					for range 5 {
						s.perEvent.Store(16) // too small: the arena moves while it fills
						lr := s.newRender(later[:1])
						for i := range later {
							lr.message(&later[i])
						}
					}
				}()
			}
			// The batch of the held messages renders on past them too.
			more := testkit.Events("sessions", "shard-1", 500, 100)
			for i := range more {
				r.message(&more[i])
			}
			wg.Wait()
			for i, m := range held {
				if !bytes.Equal(m.Data, want[i].Data) {
					t.Fatalf("message %d changed after later batches:\n%s\nwant\n%s", i, m.Data, want[i].Data)
				}
				if got, w := m.Header.Get(HeaderKeys), want[i].Header.Get(HeaderKeys); got != w || !strings.Contains(got, evs[i].EventID[len("sessions-shard-1-"):]) {
					t.Fatalf("message %d keys header %q, want %q", i, got, w)
				}
				if !reflect.DeepEqual(m.Header, want[i].Header) {
					t.Fatalf("message %d headers changed after later batches:\n%v\nwant\n%v", i, m.Header, want[i].Header)
				}
				if format != natsmsg.FormatItem {
					if _, err := event.DecodeLine(m.Data); err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
				}
			}
		})
	}
}
