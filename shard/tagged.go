package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/promreg"
)

// TagAPI is the DynamoDB API [TaggedTables] calls. *dynamodb.Client
// satisfies it.
type TagAPI interface {
	TableAPI
	ListTables(ctx context.Context, in *dynamodb.ListTablesInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ListTablesOutput, error)
	ListTagsOfResource(ctx context.Context, in *dynamodb.ListTagsOfResourceInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ListTagsOfResourceOutput, error)
}

// Tag is one KEY=VALUE a table must carry.
type Tag struct{ Key, Value string }

func (t Tag) String() string { return t.Key + "=" + t.Value }

// ParseTag parses KEY=VALUE: a key of 1 to 128 characters, a value of at
// most 256 (DynamoDB's limits); the value may be empty, the key may not.
func ParseTag(s string) (Tag, error) {
	k, v, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return Tag{}, fmt.Errorf("%q is not KEY=VALUE", s)
	case k == "" || len(k) > 128:
		return Tag{}, fmt.Errorf("%q: the key must be 1 to 128 characters", s)
	case len(v) > 256:
		return Tag{}, fmt.Errorf("%q: the value must be at most 256 characters", s)
	}
	return Tag{Key: k, Value: v}, nil
}

// TaggedOptions configure [NewTaggedTables].
type TaggedOptions struct {
	// Client lists the tables and their tags (required).
	Client TagAPI
	// Tags are what a table must carry, every one of them (AND; required).
	Tags []Tag
	// NeedOldImage: a sink takes removed items, so a stream without the
	// old image (KEYS_ONLY, NEW_IMAGE) is refused unless AllowKeysOnly.
	NeedOldImage, AllowKeysOnly bool
	// TagCallsPerSecond bounds ListTagsOfResource calls (default 10: the
	// control plane's limits are low and shared with the account's other
	// callers).
	TagCallsPerSecond float64
	// Logger receives the lister's logs (named "tables"); nil: none.
	Logger *zap.Logger
	// Registerer receives archiver_tables{state}; nil: not registered.
	Registerer prometheus.Registerer
}

// Table states, as archiver_tables counts them.
const (
	stateArchived = "archived" // handed to the walker
	stateRefused  = "refused"  // carries the tags, cannot be read: no stream, or no old image
	stateWaiting  = "waiting"  // carries the tags, not ACTIVE yet
)

// TaggedTables is a [TableSource]: every table of the account and Region
// that carries every tag of TaggedOptions.Tags. Each Tables call lists the
// tables (ListTables) and asks each one's tags (ListTagsOfResource, at most
// TagCallsPerSecond), so a table tagged later is found at the next call. A
// matching table seen for the first time is checked (DescribeTable): one
// without a stream, or whose stream lacks the old image while it is needed,
// is refused with an ERROR naming it and the fix (again whenever what is
// wrong changes), and asked about again at every call; one not ACTIVE yet
// waits. A table once handed over stays handed over for as long as it
// carries the tags: the walker follows its streams itself. One table's
// failure never stops the others.
type TaggedTables struct {
	o     TaggedOptions
	log   *zap.Logger
	gauge *prometheus.GaugeVec
	gap   time.Duration // between ListTagsOfResource calls

	mu      sync.Mutex
	arns    map[string]string // table → ARN
	state   map[string]string // table → state
	why     map[string]string // refused table → what is wrong
	waiting string            // "": some table matches; else why none does
	// badNames are the invalid names ListTables answered, warned about.
	badNames map[string]bool
	next     time.Time // earliest next ListTagsOfResource
}

// NewTaggedTables checks o and returns the lister.
func NewTaggedTables(o TaggedOptions) (*TaggedTables, error) {
	if o.Client == nil {
		return nil, errors.New("shard: TaggedOptions.Client is nil")
	}
	if len(o.Tags) == 0 {
		return nil, errors.New("shard: TaggedOptions.Tags is empty")
	}
	if o.TagCallsPerSecond <= 0 {
		o.TagCallsPerSecond = 10
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	tt := &TaggedTables{o: o, log: o.Logger.Named("tables"), gap: time.Duration(float64(time.Second) / o.TagCallsPerSecond),
		arns: map[string]string{}, state: map[string]string{}, why: map[string]string{}, badNames: map[string]bool{}}
	tt.gauge = promreg.Register(o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_tables", Help: "Tables carrying --tables-tagged's tags, by state: archived (read), refused (no stream, or no old image), waiting (not ACTIVE yet).",
	}, []string{"state"}))
	tt.waiting = "no table checked yet"
	return tt, nil
}

// tagList names the tags for messages: "archive=yes, team=a".
func (tt *TaggedTables) tagList() string {
	s := make([]string, len(tt.o.Tags))
	for i, t := range tt.o.Tags {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// Waiting returns "" while some table is archived, else why none is (for
// readiness).
func (tt *TaggedTables) Waiting() string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.waiting
}

// Tables lists the tables carrying every tag that can be read. An error
// (ListTables failed) leaves the walker's tables as they are.
func (tt *TaggedTables) Tables(ctx context.Context) ([]string, error) {
	names, err := tt.listTables(ctx)
	if err != nil {
		return nil, err
	}
	tt.forgetARNs(names)
	var out []string
	states := map[string]string{}
	for _, name := range names {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !tt.matches(ctx, name) {
			continue
		}
		st := tt.judge(ctx, name)
		states[name] = st
		if st == stateArchived {
			out = append(out, name)
		}
	}
	tt.book(states, len(out))
	return out, nil
}

// book records the states of this call in the gauge and the waiting text,
// and logs while no table matches.
func (tt *TaggedTables) book(states map[string]string, archived int) {
	counts := map[string]float64{stateArchived: 0, stateRefused: 0, stateWaiting: 0}
	for _, s := range states {
		counts[s]++
	}
	for s, n := range counts {
		tt.gauge.WithLabelValues(s).Set(n)
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for name := range tt.state {
		if _, ok := states[name]; !ok {
			delete(tt.state, name)
			delete(tt.why, name)
		}
	}
	tt.waiting = ""
	if archived == 0 {
		tt.waiting = fmt.Sprintf("no table carries tag(s) %s; waiting", tt.tagList())
		if len(states) > 0 {
			tt.waiting = fmt.Sprintf("no table carrying tag(s) %s can be read (%d refused or not ACTIVE); waiting", tt.tagList(), len(states))
		}
		tt.log.Warn(tt.waiting)
	}
}

// maxListPages bounds the ListTables pages of one listing: 100 names a
// page, so a million tables. An endpoint that pages on beyond it (or back
// to a name it paged from) is answering wrongly, and the listing fails
// rather than loop.
const maxListPages = 10_000

// listTables lists every table name (ListTables, paged), sorted and each
// once. A name that is no DynamoDB table name (an endpoint that does not
// follow the rules) is left out with a WARN, the first time it is seen:
// it would end up in checkpoint keys, metric labels and object keys.
func (tt *TaggedTables) listTables(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	var start *string
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("list tables: still paging after %d pages", maxListPages)
		}
		var lo *dynamodb.ListTablesOutput
		err := retryCall(ctx, func() error {
			var err error
			lo, err = tt.o.Client.ListTables(ctx, &dynamodb.ListTablesInput{ExclusiveStartTableName: start})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		for _, name := range lo.TableNames {
			if !seen[name] && tt.validName(name) {
				out = append(out, name)
			}
			seen[name] = true
		}
		next := aws.ToString(lo.LastEvaluatedTableName)
		if next == "" || (start != nil && next == *start) {
			sort.Strings(out)
			return out, nil
		}
		start = aws.String(next)
	}
}

// validName reports whether name is a DynamoDB table name, warning once
// per name (at most maxBadNames) when it is not.
func (tt *TaggedTables) validName(name string) bool {
	err := event.ValidTableName(name)
	if err == nil {
		return true
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if !tt.badNames[name] && len(tt.badNames) < maxBadNames {
		tt.badNames[name] = true
		tt.log.Warn("ListTables answered a name that is no DynamoDB table name; it is not archived", zap.Error(err))
	}
	return false
}

// maxBadNames bounds the invalid names remembered (and warned about once).
const maxBadNames = 100

// retryCall runs call, retrying throttling and transient errors a few
// times with backoff.
func retryCall(ctx context.Context, call func() error) error {
	p := backoff.Policy{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for n := 0; ; n++ {
		err := call()
		if err == nil || n >= 3 || !awserr.IsRetryable(err) {
			return err
		}
		if !backoff.Sleep(ctx, p.Delay(n)) {
			return errors.Join(err, ctx.Err())
		}
	}
}

// matches reports whether the table carries every tag. A table whose tags
// cannot be read keeps its previous state's answer (handed over: yes).
func (tt *TaggedTables) matches(ctx context.Context, name string) bool {
	arn, err := tt.arnOf(ctx, name)
	if err == nil {
		var tags map[string]string
		if tags, err = tt.tagsOf(ctx, arn); err == nil {
			for _, want := range tt.o.Tags {
				if v, ok := tags[want.Key]; !ok || v != want.Value {
					return false
				}
			}
			return true
		}
	}
	if awserr.Code(err) != "ResourceNotFoundException" && ctx.Err() == nil {
		tt.log.Warn("reading a table's tags failed; it keeps its state until the next refresh", zap.String("table", name),
			zap.String("class", awserr.Classify(err).String()), zap.Error(err))
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.state[name] == stateArchived
}

// forgetARNs drops the cached ARNs of tables no longer listed.
func (tt *TaggedTables) forgetARNs(listed []string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for name := range tt.arns {
		if _, ok := slices.BinarySearch(listed, name); !ok {
			delete(tt.arns, name)
		}
	}
}

// arnOf returns the table's ARN, from DescribeTable the first time.
func (tt *TaggedTables) arnOf(ctx context.Context, name string) (string, error) {
	tt.mu.Lock()
	arn := tt.arns[name]
	tt.mu.Unlock()
	if arn != "" {
		return arn, nil
	}
	d, err := tt.describe(ctx, name)
	if err != nil {
		return "", err
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.arns[name] = aws.ToString(d.TableArn)
	return tt.arns[name], nil
}

func (tt *TaggedTables) describe(ctx context.Context, name string) (*ddbtypes.TableDescription, error) {
	var out *dynamodb.DescribeTableOutput
	err := retryCall(ctx, func() error {
		var err error
		out, err = tt.o.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		return err
	})
	if err != nil {
		return nil, err
	}
	if out.Table == nil || aws.ToString(out.Table.TableArn) == "" {
		return nil, fmt.Errorf("describe table %s: no table description or ARN in the answer", name)
	}
	return out.Table, nil
}

// tagsOf lists the resource's tags (paged), at most TagCallsPerSecond
// calls a second.
func (tt *TaggedTables) tagsOf(ctx context.Context, arn string) (map[string]string, error) {
	tags := map[string]string{}
	var token *string
	for {
		if !tt.pace(ctx) {
			return nil, ctx.Err()
		}
		var out *dynamodb.ListTagsOfResourceOutput
		err := retryCall(ctx, func() error {
			var err error
			out, err = tt.o.Client.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(arn), NextToken: token})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, t := range out.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if aws.ToString(out.NextToken) == "" {
			return tags, nil
		}
		token = out.NextToken
	}
}

// pace waits for the next ListTagsOfResource slot; false when ctx ended.
func (tt *TaggedTables) pace(ctx context.Context) bool {
	tt.mu.Lock()
	now := time.Now()
	at := tt.next
	if at.Before(now) {
		at = now
	}
	tt.next = at.Add(tt.gap)
	tt.mu.Unlock()
	return backoff.Sleep(ctx, at.Sub(now))
}

// judge returns a matching table's state: archived once handed over;
// else checked (DescribeTable) for a stream with what is needed.
func (tt *TaggedTables) judge(ctx context.Context, name string) string {
	tt.mu.Lock()
	prev := tt.state[name]
	tt.mu.Unlock()
	if prev == stateArchived {
		return prev
	}
	state, why := stateArchived, ""
	d, err := tt.describe(ctx, name)
	switch {
	case err != nil:
		state, why = stateWaiting, "DescribeTable failed ("+awserr.Classify(err).String()+"): "+err.Error()
	case d.TableStatus != ddbtypes.TableStatusActive && aws.ToString(d.LatestStreamArn) == "":
		state, why = stateWaiting, "status "+string(d.TableStatus)
	default:
		state, why = tt.check(d)
	}
	tt.note(name, prev, state, why)
	return state
}

// check judges an ACTIVE table's stream.
func (tt *TaggedTables) check(d *ddbtypes.TableDescription) (state, why string) {
	spec := d.StreamSpecification
	if aws.ToString(d.LatestStreamArn) == "" || spec == nil || !aws.ToBool(spec.StreamEnabled) {
		return stateRefused, "it has no stream: enable DynamoDB Streams on it (view type NEW_AND_OLD_IMAGES)"
	}
	switch spec.StreamViewType {
	case ddbtypes.StreamViewTypeKeysOnly, ddbtypes.StreamViewTypeNewImage:
		if tt.o.NeedOldImage && !tt.o.AllowKeysOnly {
			return stateRefused, fmt.Sprintf("its stream's view type %s carries no old image, which expired and deleted items need: "+
				"set it to NEW_AND_OLD_IMAGES (disable and re-enable the stream), or start with --allow-keys-only to archive their keys alone",
				spec.StreamViewType)
		}
	}
	return stateArchived, ""
}

// note logs a state change: INFO when archived, ERROR when refused (once
// per reason), INFO when waiting.
func (tt *TaggedTables) note(name, prev, state, why string) {
	tt.mu.Lock()
	changed := prev != state || tt.why[name] != why
	tt.state[name], tt.why[name] = state, why
	tt.mu.Unlock()
	if !changed {
		return
	}
	log := tt.log.With(zap.String("table", name), zap.String("tags", tt.tagList()))
	switch state {
	case stateArchived:
		log.Info("table carries the tags; archiving it")
	case stateRefused:
		log.Error("table carries the tags but is not read: " + why)
	case stateWaiting:
		log.Info("table carries the tags; waiting for it", zap.String("why", why))
	}
}
