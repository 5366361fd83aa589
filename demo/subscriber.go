package demo

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// subscriber is what another service would see on NATS: it prints each
// expiry as it arrives (once per event ID) and keeps what the summary
// needs.
type subscriber struct {
	out     *printer
	precise bool
	nc      *nats.Conn
	sub     *nats.Subscription

	mu        sync.Mutex
	published map[string]bool
	lags      []time.Duration // deletion time - ExpirationTime (stream precision: seconds)
	latencies []time.Duration // arrival on NATS - ExpirationTime
	byWhom    map[string]int  // Metadata.deletedBy
}

// subscribe connects to natsURL and subscribes to demo.>.
func subscribe(natsURL string, out *printer, precise bool) (*subscriber, error) {
	nc, err := nats.Connect(natsURL, nats.Name("demo-subscriber"))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	s := &subscriber{out: out, precise: precise, nc: nc, published: map[string]bool{}, byWhom: map[string]int{}}
	s.sub, err = nc.Subscribe("demo.>", s.handle)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return s, nil
}

// close unsubscribes and closes the connection.
func (s *subscriber) close() {
	_ = s.sub.Unsubscribe()
	s.nc.Close()
}

// flush waits until the server processed what the connection sent.
func (s *subscriber) flush() { _ = s.nc.Flush() }

// count is the number of distinct events received.
func (s *subscriber) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.published)
}

// line is the part of an archive line the subscriber reads.
type line struct {
	Keys     map[string]map[string]any
	Metadata struct {
		Kind          string   `json:"kind"`
		EventID       string   `json:"eventID"`
		TTLLagSeconds *float64 `json:"ttlLagSeconds"`
		TTLTime       string   `json:"ttlTime"`
		DeletionTime  string   `json:"deletionTime"`
		DeletedBy     string   `json:"deletedBy"`
	}
}

func (s *subscriber) handle(m *nats.Msg) {
	var l line
	if err := json.Unmarshal(m.Data, &l); err != nil {
		s.out.printf("  ! undecodable message on %s: %v\n", m.Subject, err)
		return
	}
	arrived := time.Now()
	lag, latency := time.Duration(-1), time.Duration(-1)
	if ttl, err := time.Parse(time.RFC3339Nano, l.Metadata.TTLTime); err == nil {
		latency = arrived.Sub(ttl)
		lag = 0 // absent ttlLagSeconds: an older version's line, deleted within the TTL's second
		if l.Metadata.TTLLagSeconds != nil {
			lag = time.Duration(*l.Metadata.TTLLagSeconds * float64(time.Second))
		}
	}
	if !s.record(l, lag, latency) {
		return
	}
	user, _ := l.Keys["UserName"]["S"].(string)
	session, _ := l.Keys["SessionId"]["S"].(string)
	lagText, latText := "?", "?"
	if lag >= 0 {
		lagText = lag.Round(time.Millisecond).String()
		latText = latency.Round(time.Millisecond).String()
	}
	by := ""
	if s.precise {
		by = "  deleted by " + map[string]string{"other": "archiver sweep", "dynamodb-ttl": "TTL"}[l.Metadata.DeletedBy]
	}
	s.out.printf("  expired  %-6s %-8s TTL lag %-4s on NATS %-7s after ExpirationTime (%s)%s\n", user, session, lagText, latText, m.Subject, by)
}

// record keeps an event seen for the first time and says whether it was.
func (s *subscriber) record(l line, lag, latency time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.published[l.Metadata.EventID] {
		return false
	}
	s.published[l.Metadata.EventID] = true
	if lag >= 0 {
		s.lags = append(s.lags, lag)
		s.latencies = append(s.latencies, latency)
	}
	s.byWhom[l.Metadata.DeletedBy]++
	return true
}
