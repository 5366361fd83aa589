package consumer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/event/eventtest"
)

// ttlAPI answers DescribeTimeToLive from a script, to inject failures and
// attribute changes the engine cannot produce on demand.
type ttlAPI struct {
	mu    sync.Mutex
	attr  string
	err   error
	calls int
}

func (f *ttlAPI) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	d := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	if f.attr != "" {
		d = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String(f.attr)}
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
}

// attr is the cache's answer for table "tbl", without the reason it is
// unknown.
func attr(c *ttlCache, ctx context.Context) string {
	a, _ := c.lookup(ctx, "tbl")
	return a
}

func TestTTLCache(t *testing.T) {
	api := &ttlAPI{err: errors.New("throttled")}
	now := time.Unix(1000, 0)
	reg := prometheus.NewRegistry()
	c := newTTLCache(api, 5*time.Minute, func() time.Time { return now }, zap.NewNop(), newMetrics(reg))
	ctx := context.Background()
	steps := []struct {
		name      string
		advance   time.Duration
		setAttr   string
		setErr    error
		want      string
		wantCalls int
	}{
		{"first lookup fails: unknown", 0, "", errors.New("throttled"), "", 1},
		{"unknown is not retried at once", time.Second, "expires", nil, "", 1},
		{"unknown is retried after 10s", 10 * time.Second, "expires", nil, "expires", 2},
		{"known is cached", time.Minute, "other", nil, "expires", 2},
		{"known is refreshed on the timer", 5 * time.Minute, "other", nil, "other", 3},
		{"a failed refresh keeps the last answer", 5 * time.Minute, "", errors.New("down"), "other", 4},
		{"disabled TTL: unknown", 5 * time.Minute, "", nil, "", 5},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		api.mu.Lock()
		api.attr, api.err = s.setAttr, s.setErr
		api.mu.Unlock()
		if got := attr(c, ctx); got != s.want {
			t.Fatalf("%s: attribute = %q, want %q", s.name, got, s.want)
		}
		if api.calls != s.wantCalls {
			t.Fatalf("%s: %d calls, want %d", s.name, api.calls, s.wantCalls)
		}
	}
	if v := counterSum(t, reg, "archiver_ttl_lookup_failures_total"); v != 2 {
		t.Errorf("lookup failures counted %v, want 2", v)
	}
	// No API (stream ARNs only): unknown, no call.
	if got := attr(newTTLCache(nil, time.Minute, time.Now, zap.NewNop(), newMetrics(nil)), ctx); got != "" {
		t.Errorf("attribute without an API = %q", got)
	}
}

// TestTTLCacheCanceledCaller: a lookup whose caller was canceled (a stop,
// a lease handed off) caches nothing: the next caller asks at once and
// gets the attribute, instead of ten seconds of events without TTL
// metadata.
func TestTTLCacheCanceledCaller(t *testing.T) {
	api := &ttlAPI{attr: "expires", err: context.Canceled}
	now := time.Unix(1000, 0)
	reg := prometheus.NewRegistry()
	c := newTTLCache(api, 5*time.Minute, func() time.Time { return now }, zap.NewNop(), newMetrics(reg))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if got := attr(c, canceled); got != "" {
		t.Fatalf("canceled lookup = %q, want unknown", got)
	}
	api.mu.Lock()
	api.err = nil
	api.mu.Unlock()
	if got := attr(c, context.Background()); got != "expires" || api.calls != 2 {
		t.Fatalf("next lookup = %q after %d calls, want expires asked again", got, api.calls)
	}
	if v := counterSum(t, reg, "archiver_ttl_lookup_failures_total"); v != 0 {
		t.Errorf("lookup failures counted %v, want 0 (a canceled caller is no failure)", v)
	}
}

// TestTTLAttributeCanceledBatch: under expired-when service a lookup
// that failed is no reason to hold a batch back, but one cut short because
// the shard's context is done fails the batch: handed to the sinks, its
// expiries would go without TTL metadata although the next owner of the
// shard reads them again with it.
func TestTTLAttributeCanceledBatch(t *testing.T) {
	remove := []stypes.Record{eventtest.Record(stypes.OperationTypeRemove, eventtest.TTLService(), "100")}
	api := &ttlAPI{err: errors.New("throttled")}
	c := &Consumer{cfg: Config{ExpiredWhen: event.ExpiredWhenService},
		ttl: newTTLCache(api, time.Minute, time.Now, zap.NewNop(), newMetrics(nil))}
	if a, err := c.ttlAttribute(context.Background(), "tbl", remove); a != "" || err != nil {
		t.Fatalf("failed lookup: %q, %v; want \"\" and no error (the batch goes on)", a, err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	api.mu.Lock()
	api.err = context.Canceled
	api.mu.Unlock()
	c.ttl = newTTLCache(api, time.Minute, time.Now, zap.NewNop(), newMetrics(nil))
	if _, err := c.ttlAttribute(canceled, "tbl", remove); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled lookup: %v, want the batch failed with context.Canceled", err)
	}
}
