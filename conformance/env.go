package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// Env is the endpoint under test and how to measure it. Set the exported
// fields; Run gives each check a copy of its own.
type Env struct {
	// Endpoint names the endpoint in the report ("" for AWS's own).
	Endpoint string
	// DynamoDB and Streams are clients of the endpoint in Region.
	DynamoDB *dynamodb.Client
	Streams  *dynamodbstreams.Client
	Region   string
	// OtherRegion is where global-replicas adds its replica, and In gives
	// clients of the same endpoint in another Region; with In nil that
	// check skips.
	OtherRegion string
	In          func(region string) (*dynamodb.Client, *dynamodbstreams.Client)
	// Bound is how long an expired item may take to be deleted (and a
	// stream record or a replicated write to arrive): the checks wait
	// up to this long, and fail when it passes.
	Bound time.Duration
	// Control is this project's engine's control API, or nil: with it
	// the checks sweep TTL, move the clock, close shards and trim
	// streams instead of waiting for them.
	Control *Control
	// Slow lets a check without Control wait in real time for what takes
	// minutes (an iterator's 15 minutes); without it that check skips.
	Slow bool
	// Prefix begins the name of every table the run creates; NewPrefix
	// makes a unique one.
	Prefix string

	run      *runState                     // what the checks of one Run share
	check    string                        // the check this copy is for
	seq      int                           // tables made so far by the check
	cleanups []func(context.Context) error // undo what the check made, last first
}

// runState is what one check learns that spares the next a wait: set by
// the first check that waited the whole bound for a TTL deletion that
// never came. Checks run one at a time.
type runState struct {
	noTTL string
}

// NewPrefix is a table-name prefix unique to one run:
// "conformance-<8 hex digits>-".
func NewPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "conformance-" + hex.EncodeToString(b[:]) + "-"
}

// newRun is a copy of e for one Run, with nothing learned yet.
func (e *Env) newRun() *Env {
	c := *e
	c.run = &runState{}
	if c.Prefix == "" {
		c.Prefix = NewPrefix()
	}
	return &c
}

// forCheck is a copy of e for the check named name.
func (e *Env) forCheck(name string) *Env {
	c := *e
	c.check, c.seq, c.cleanups = name, 0, nil
	return &c
}

// tableName is a new table name for the check: the run's prefix, the
// check's name and a number.
func (e *Env) tableName() string {
	e.seq++
	return fmt.Sprintf("%s%s-%d", e.Prefix, e.check, e.seq)
}

// defer_ registers f to undo something the check made; cleanup runs them.
func (e *Env) defer_(f func(context.Context) error) { e.cleanups = append(e.cleanups, f) }

// cleanup undoes what the check made, last first, with a context of its
// own (the run's may have ended), and joins what failed.
func (e *Env) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), tableWait)
	defer cancel()
	var errs []error
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		if err := e.cleanups[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	e.cleanups = nil
	return errors.Join(errs...)
}

// now is the endpoint's time: the engine's clock through Control (it may
// be a manual clock, far from the wall's), else this machine's.
func (e *Env) now(ctx context.Context) (time.Time, error) {
	if e.Control != nil {
		return e.Control.Now(ctx)
	}
	return time.Now(), nil
}

// pollPolicy spaces the looks of a wait: from 20 ms up to a two-hundredth
// of the bound (at least 100 ms, at most 30 s), so a delay is measured
// finely on a local endpoint and AWS is not asked every second for days.
func (e *Env) pollPolicy() backoff.Policy {
	return backoff.Policy{Min: 20 * time.Millisecond, Max: min(max(e.Bound/200, 100*time.Millisecond), 30*time.Second)}
}

// errNotYet is a wait's condition not holding yet.
var errNotYet = errors.New("not yet")

// waitFor calls f until it returns nil, an error other than errNotYet, or
// limit passes (then errNotYet); it returns how long it waited. With
// Control and sweep set it sweeps TTL before each look.
func (e *Env) waitFor(ctx context.Context, limit time.Duration, sweep bool, f func(ctx context.Context) error) (time.Duration, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pol := e.pollPolicy()
	for n := 0; ; n++ {
		if sweep && e.Control != nil {
			if err := e.Control.Sweep(ctx); err != nil {
				return time.Since(start), err
			}
		}
		err := f(ctx)
		if !errors.Is(err, errNotYet) {
			return time.Since(start), err
		}
		if !backoff.Sleep(wctx, pol.Delay(n)) {
			if ctx.Err() != nil {
				return time.Since(start), ctx.Err()
			}
			return time.Since(start), errNotYet
		}
	}
}

// Ping asks the endpoint for one table name, so that an endpoint that
// does not answer as DynamoDB (or refuses the credentials) is one error
// before the run rather than a failure of every check.
func (e *Env) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := e.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)}); err != nil {
		return fmt.Errorf("ListTables: %w", short(err))
	}
	return nil
}
