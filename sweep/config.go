package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// DynamoAPI is the DynamoDB API the sweeper calls. *dynamodb.Client
// satisfies it. The sweeper retries every call itself (counting
// throttles, and spending the delete budget on every write attempt) and
// turns the client's own retries off.
type DynamoAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Config configures a Sweeper. Client, Table and Cursor are required; a
// zero value elsewhere takes the default named on the field.
type Config struct {
	Client DynamoAPI
	Table  string
	// Index is the global secondary index with the window attribute as
	// its hash key (default DefaultIndex). With the TTL attribute as its
	// range key (the recipe), open windows are queried for due items
	// only; with another range key or none, whole windows are read and
	// filtered.
	Index string
	// WindowAttribute is the attribute that names an item's window
	// (default DefaultWindowAttribute).
	WindowAttribute string
	// TTLAttribute is the table's TTL attribute; empty: the one
	// DescribeTimeToLive names (a table without TTL enabled is then an
	// error). Set, it is for a table whose DynamoDB TTL is off: on a
	// table whose TTL is enabled on another attribute the sweeper refuses
	// to start (a *TTLAttributeMismatchError) unless TTLAttributeOverride.
	TTLAttribute string
	// TTLAttributeOverride lets TTLAttribute differ from the attribute
	// the table's TTL is enabled on: the sweeper then deletes items
	// DynamoDB's TTL does not consider expired.
	TTLAttributeOverride bool
	// Window is the windows' length (default 1m), a whole number of
	// milliseconds; WindowShards (default 1) the number of index
	// partitions a window is spread over. Both must be what the writers
	// use (see Window).
	Window       time.Duration
	WindowShards int
	// Interval is the pause between the starts of two passes of Run
	// (default 1s). A pass that takes longer is followed at once by the
	// next.
	Interval time.Duration
	// Grace is how long after its end a window is closed: read whole,
	// then left behind by the cursor (default: one Window). It covers
	// items written with a TTL that is about to pass and the index's
	// eventual consistency. Items written with a TTL older than that are
	// left to DynamoDB's TTL.
	Grace time.Duration
	// Lookback is how far before now a sweeper without a cursor starts
	// (default 1h).
	Lookback time.Duration
	// MaxDeletesPerSecond caps the write requests (deletes and re-files,
	// retries included) the sweeper sends per second; 0 means no cap.
	MaxDeletesPerSecond int
	// Concurrency is how many write requests may be in flight at once
	// (default 16).
	Concurrency int
	// Cursor keeps the sweeper's cursor between runs.
	Cursor CursorStore
	// MaxClockSkew is how far Now may disagree with DynamoDB's clock (the
	// Date header of its responses) before deletes pause (default
	// DefaultMaxClockSkew); negative: no check. A pass whose clock is
	// beyond it deletes nothing and moves no cursor; deletes resume once
	// a response shows the clocks within it again.
	MaxClockSkew time.Duration

	Now        func() time.Time      // default time.Now
	Logger     *zap.Logger           // default zap.NewNop()
	Registerer prometheus.Registerer // nil: metrics are kept but not registered
}

// Defaults of Config.
const (
	DefaultWindow      = time.Minute
	DefaultInterval    = time.Second
	DefaultLookback    = time.Hour
	DefaultConcurrency = 16
	// DefaultMaxClockSkew is one second: a sample is uncertain by up to a
	// second (Date's one-second resolution, responses slower than a
	// second are not used), so a right clock never pauses and one more
	// than 2 s off always does. The consumer's past-ttl rule counts a
	// delete as an expiry when its TTL lies before the delete's second
	// ends, so a clock that is ahead must stay within about a second.
	DefaultMaxClockSkew = time.Second
)

// withDefaults validates c and fills in its defaults. Errors name the
// field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("sweep: Config.%s %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Client == nil {
		bad("Client", "is required")
	}
	if c.Table == "" {
		bad("Table", "is required")
	}
	if c.Cursor == nil {
		bad("Cursor", "is required")
	}
	c.Index = or(c.Index, DefaultIndex)
	c.WindowAttribute = or(c.WindowAttribute, DefaultWindowAttribute)
	c.Window = or(c.Window, DefaultWindow)
	if c.Window < time.Millisecond || c.Window%time.Millisecond != 0 {
		bad("Window", "is %v: want a positive whole number of milliseconds", c.Window)
	}
	c.Grace = or(c.Grace, max(c.Window, 0))
	c.WindowShards = or(c.WindowShards, 1)
	c.Interval = or(c.Interval, DefaultInterval)
	c.Lookback = or(c.Lookback, DefaultLookback)
	c.Concurrency = or(c.Concurrency, DefaultConcurrency)
	c.MaxClockSkew = or(c.MaxClockSkew, DefaultMaxClockSkew)
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"WindowShards", c.WindowShards < 0},
		{"Interval", c.Interval < 0},
		{"Grace", c.Grace < 0},
		{"Lookback", c.Lookback < 0},
		{"MaxDeletesPerSecond", c.MaxDeletesPerSecond < 0},
		{"Concurrency", c.Concurrency < 0},
	} {
		if f.neg {
			bad(f.name, "is negative")
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c, errors.Join(errs...)
}

// or is v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
