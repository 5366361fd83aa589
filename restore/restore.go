// Package restore writes archived items back into DynamoDB (`archiver
// restore`) and holds the selection restore and replay share (--key,
// --where).
//
// A restore never clobbers by default: each PutItem carries
// attribute_not_exists(<hash key>), and an item that exists is counted and
// left alone. It never lets a restored item expire at once: by default the
// TTL attribute is set to the run's start plus TTLExtend.
//
// # Resuming
//
// With a resume file, every event the restore finishes with is recorded
// by its event ID, and a later run with the same file skips those events.
// The guarantee after a kill (even SIGKILL) and a resume:
//
//   - Default (conditional writes): every selected item is written exactly
//     once. Records are fsynced in batches; an event written but not yet
//     recorded is tried again, and its attribute_not_exists condition fails
//     (the item is there), so it is counted as "exists" and not written
//     again.
//   - With Overwrite: each event is recorded durably (fsynced) right after
//     its PutItem was acknowledged and before its worker moves on, so at
//     most the one write per worker in flight at the kill is repeated. The
//     repeat writes identical content (the TTL is counted from the first
//     run's start, kept in the file), which DynamoDB applies without a
//     stream record; nothing written after it is ever undone.
//
// Events of one key always go to the same worker, in archive order, so
// parallel writers give the same outcome as one: with conditional writes
// a key's first selected event wins, with Overwrite its last.
package restore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/progress"
)

// DB is what a restore needs of DynamoDB (a *dynamodb.Client).
type DB interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// TTLMode says what a restore does to the TTL attribute.
type TTLMode int

const (
	// TTLExtend sets it to the run's start plus Config.TTLExtend.
	TTLExtend TTLMode = iota
	// TTLKeep writes it as archived (the item may expire again at once).
	TTLKeep
	// TTLRemove drops it (the item never expires).
	TTLRemove
)

// Config is one restore.
type Config struct {
	DB    DB
	Table string // where items are written
	// Select picks events beyond the archive reader's pruning (nil: all).
	Select *Selection
	TTL    TTLMode
	// TTLExtend is how long after the run's start restored items expire
	// with TTLExtend (default 7 days).
	TTLExtend time.Duration
	// TTLAttribute overrides the TTL attribute's name (default: the one
	// DescribeTimeToLive names for Table, else each event's).
	TTLAttribute string
	Overwrite    bool
	// DryRun, when set, receives one line per selected event (its key and
	// what a restore would do) and nothing is written.
	DryRun io.Writer
	// Rate caps PutItem requests per second, retries included (0: none).
	Rate float64
	// Parallel is the number of writers (default 8).
	Parallel int
	// ResumeFile records progress (see the package doc); "" for none.
	ResumeFile string
	// Backoff paces retries after throttling (default 50ms to 5s).
	Backoff  backoff.Policy
	Logger   *zap.Logger
	Progress *progress.Reporter // counts items done (nil: none)
	Now      func() time.Time
}

// Source feeds a restore the archived events in archive order.
type Source func(ctx context.Context, fn func(*event.Event) error) error

// Result counts what a restore did with each event it was given.
type Result struct {
	Events      int64 // given by the source
	NotSelected int64 // left out by --key / --where
	Written     int64 // PutItem succeeded
	Exists      int64 // skipped: an item with that key exists (conditional write failed)
	NoImage     int64 // skipped: the archive holds only the keys
	Resumed     int64 // skipped: finished by an earlier run (resume file)
	Failed      int64 // PutItem refused for good (logged)
	WouldWrite  int64 // dry run: would be written
	Throttled   int64 // PutItem retries after throttling
}

// Run restores the events src yields into cfg.Table and returns what it
// did. It fails when the table cannot be described, the resume file cannot
// be used, or any PutItem failed for a reason other than throttling or the
// item existing (every such failure is logged with its key).
func Run(ctx context.Context, cfg Config, src Source) (Result, error) {
	r, err := newRestorer(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer r.j.close()
	if cfg.DryRun != nil {
		err = src(ctx, r.dryRun)
		return r.result(), err
	}
	err = r.runWorkers(ctx, src)
	if cerr := r.j.close(); err == nil {
		err = cerr
	}
	res := r.result()
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("%d item(s) could not be written (see the log)", res.Failed)
	}
	return res, err
}

// restorer is one run's state.
type restorer struct {
	cfg     Config
	log     *zap.Logger
	hashKey string
	keyAttr []string // hash key, then range key if any
	ttlAttr string   // "" when unknown: each event's TTLAttribute
	ttlAt   string   // the TTL value written with TTLExtend
	j       *journal
	lim     *limiter
	// sdkRetry leaves throttling to the restore's own backoff: the SDK
	// retries only connection errors.
	sdkRetry func(*dynamodb.Options)
	c        struct {
		events, notSelected, written, exists, noImage, resumed, failed, would, throttled atomic.Int64
	}
}

func newRestorer(ctx context.Context, cfg Config) (*restorer, error) {
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.TTLExtend <= 0 {
		cfg.TTLExtend = 7 * 24 * time.Hour
	}
	if cfg.Backoff.Min <= 0 {
		cfg.Backoff = backoff.Policy{Min: 50 * time.Millisecond, Max: 5 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	r := &restorer{cfg: cfg, log: cfg.Logger, lim: newLimiter(cfg.Rate)}
	rt := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
		o.RateLimiter = ratelimit.None
	})
	r.sdkRetry = func(o *dynamodb.Options) { o.Retryer = rt }
	if err := r.describe(ctx); err != nil {
		return nil, err
	}
	start := cfg.Now()
	if cfg.ResumeFile != "" && cfg.DryRun == nil {
		j, err := openJournal(cfg.ResumeFile, cfg.Table, start)
		if err != nil {
			return nil, err
		}
		r.j, start = j, j.head.Start
	}
	r.ttlAt = strconv.FormatInt(start.Add(cfg.TTLExtend).Unix(), 10)
	return r, nil
}

// describe learns the table's key schema and TTL attribute.
func (r *restorer) describe(ctx context.Context) error {
	out, err := r.cfg.DB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.cfg.Table)})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", r.cfg.Table, err)
	}
	for _, k := range out.Table.KeySchema {
		if k.KeyType == ddb.KeyTypeHash {
			r.hashKey = aws.ToString(k.AttributeName)
			r.keyAttr = append([]string{r.hashKey}, r.keyAttr...)
		} else {
			r.keyAttr = append(r.keyAttr, aws.ToString(k.AttributeName))
		}
	}
	r.ttlAttr = r.cfg.TTLAttribute
	if r.ttlAttr != "" {
		return nil
	}
	ttl, err := r.cfg.DB.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(r.cfg.Table)})
	if err != nil {
		return fmt.Errorf("describe time to live of %s: %w", r.cfg.Table, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == ddb.TimeToLiveStatusEnabled || d.TimeToLiveStatus == ddb.TimeToLiveStatusEnabling) {
		r.ttlAttr = aws.ToString(d.AttributeName)
	}
	return nil
}

func (r *restorer) result() Result {
	c := &r.c
	return Result{Events: c.events.Load(), NotSelected: c.notSelected.Load(), Written: c.written.Load(),
		Exists: c.exists.Load(), NoImage: c.noImage.Load(), Resumed: c.resumed.Load(), Failed: c.failed.Load(),
		WouldWrite: c.would.Load(), Throttled: c.throttled.Load()}
}

// image is the item an event restores: the old image of a removal, the
// new image otherwise; nil when the archive holds only the keys. An
// archive line's Item falls back to the keys when the stream carried no
// image (view type KEYS_ONLY, or NEW_IMAGE for a removal), so an image
// with no attribute beyond the keys counts as none: an expired item
// always had its TTL attribute besides.
func image(e *event.Event) event.Item {
	img := e.NewImage
	if e.EventName == "REMOVE" || e.Kind == event.Expired || e.Kind == event.Deleted {
		img = e.OldImage
	}
	if len(img) == 0 {
		return nil
	}
	for a := range img {
		if _, isKey := e.Keys[a]; !isKey {
			return img
		}
	}
	return nil
}

// key is the item's primary key, as archived.
func (r *restorer) key(e *event.Event) event.Item {
	if len(e.Keys) > 0 {
		return e.Keys
	}
	img := image(e)
	k := event.Item{}
	for _, a := range r.keyAttr {
		if v, ok := img[a]; ok {
			k[a] = v
		}
	}
	return k
}

// triage counts an event that needs no write and reports whether it
// does need one.
func (r *restorer) triage(e *event.Event) (write bool, action string) {
	r.c.events.Add(1)
	switch {
	case !r.cfg.Select.Match(e):
		r.c.notSelected.Add(1)
		return false, ""
	case r.j.has(e.EventID):
		r.c.resumed.Add(1)
		return false, "skip: restored by an earlier run (resume file)"
	case image(e) == nil:
		r.c.noImage.Add(1)
		return false, "skip: the archive holds only the keys (stream view type KEYS_ONLY)"
	}
	return true, ""
}

func (r *restorer) dryRun(e *event.Event) error {
	write, action := r.triage(e)
	if write {
		r.c.would.Add(1)
		action = "put if absent"
		if r.cfg.Overwrite {
			action = "put, overwriting"
		}
	}
	if action != "" {
		r.cfg.DryRun.Write(append(event.MarshalItem(r.key(e)), " "+action+"\n"...))
	}
	if r.cfg.Progress != nil {
		r.cfg.Progress.AddItems(1)
	}
	return nil
}

// runWorkers hands each selected event to the worker of its key and
// waits for all of them.
func (r *restorer) runWorkers(ctx context.Context, src Source) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	n := r.cfg.Parallel
	chans := make([]chan *event.Event, n)
	var wg sync.WaitGroup
	for i := range chans {
		chans[i] = make(chan *event.Event, 64)
		wg.Go(func() {
			for e := range chans[i] {
				if err := r.restore(ctx, e); err != nil {
					cancel(err)
				}
			}
		})
	}
	stopSync := r.syncEverySecond(ctx)
	err := src(ctx, func(e *event.Event) error {
		write, _ := r.triage(e)
		if !write {
			if r.cfg.Progress != nil {
				r.cfg.Progress.AddItems(1)
			}
			return nil
		}
		h := fnv.New64a()
		h.Write(event.MarshalItem(r.key(e)))
		select {
		case chans[h.Sum64()%uint64(n)] <- e:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	stopSync()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err != nil {
		return err
	}
	return ctx.Err()
}

// syncEverySecond fsyncs the resume file's batched records every second.
func (r *restorer) syncEverySecond(ctx context.Context) (stop func()) {
	if r.j == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := r.j.sync(); err != nil {
					r.log.Warn("saving progress to the resume file failed", zap.Error(err))
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// restore writes one event's item and records it. It returns an error
// only when the run must stop (the resume file failed, ctx ended).
func (r *restorer) restore(ctx context.Context, e *event.Event) error {
	if ctx.Err() != nil {
		return nil
	}
	if r.cfg.Progress != nil {
		defer r.cfg.Progress.AddItems(1)
	}
	in := r.putInput(e)
	err := r.put(ctx, in)
	var cfe *ddb.ConditionalCheckFailedException
	switch {
	case err == nil:
		r.c.written.Add(1)
	case errors.As(err, &cfe):
		r.c.exists.Add(1)
	case ctx.Err() != nil:
		return nil
	default:
		r.c.failed.Add(1)
		r.log.Error("restoring an item failed", zap.ByteString("key", event.MarshalItem(r.key(e))),
			zap.String("event_id", e.EventID), zap.Error(err))
		return nil // not recorded: a resumed run tries it again
	}
	return r.j.record(e.EventID, r.cfg.Overwrite)
}

// putInput builds the PutItem of an event's image, TTL set as configured.
func (r *restorer) putInput(e *event.Event) *dynamodb.PutItemInput {
	item := ToDynamoDB(image(e))
	ttl := r.ttlAttr
	if ttl == "" {
		ttl = e.TTLAttribute
	}
	// An item that had no TTL (a deleted one, say) is not given one.
	if _, had := item[ttl]; had && ttl != "" {
		switch r.cfg.TTL {
		case TTLExtend:
			item[ttl] = &ddb.AttributeValueMemberN{Value: r.ttlAt}
		case TTLRemove:
			delete(item, ttl)
		}
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(r.cfg.Table), Item: item}
	if !r.cfg.Overwrite {
		in.ConditionExpression = aws.String("attribute_not_exists(#k)")
		in.ExpressionAttributeNames = map[string]string{"#k": r.hashKey}
	}
	return in
}

// put sends the PutItem, retrying throttling with backoff for as long as
// ctx lasts.
func (r *restorer) put(ctx context.Context, in *dynamodb.PutItemInput) error {
	for attempt := 0; ; attempt++ {
		if err := r.lim.Wait(ctx); err != nil {
			return err
		}
		_, err := r.cfg.DB.PutItem(ctx, in, r.sdkRetry)
		if err == nil || !awserr.IsThrottle(err) {
			return err
		}
		r.c.throttled.Add(1)
		if attempt == 0 || attempt%20 == 0 {
			r.log.Info("throttled; backing off", zap.Int("attempt", attempt+1), zap.Error(err))
		}
		if !backoff.Sleep(ctx, r.cfg.Backoff.Delay(attempt)) {
			return ctx.Err()
		}
	}
}
