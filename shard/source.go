package shard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/redact"
)

// What a source check finds wrong. A *SourceError wraps one of them (match
// with errors.Is), except for an answer the check does not recognise,
// which it wraps as it came.
var (
	ErrNoSuchTable    = errors.New("no such table")
	ErrNoSuchStream   = errors.New("no such stream")
	ErrStreamDisabled = errors.New("no stream enabled")
	ErrNoOldImage     = errors.New("the stream carries no old image")
	ErrUnreachable    = errors.New("endpoint unreachable")
	ErrCredentials    = errors.New("credentials refused")
	ErrAccessDenied   = errors.New("access denied")
)

// SourceTimeout is the default bound of a source check ([SourceCheck.Timeout]).
const SourceTimeout = 10 * time.Second

// SourceAPI is the DynamoDB API a source check calls. *dynamodb.Client
// satisfies it.
type SourceAPI interface {
	TableAPI
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// StreamDescriber is the DynamoDB Streams call a source check makes for an
// explicit stream ARN. *dynamodbstreams.Client satisfies it.
type StreamDescriber interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
}

// SourceCheck is what [CheckSources] proves before a command reads a
// stream (archiver run, verify --table) or writes a table (restore).
type SourceCheck struct {
	Tables  SourceAPI       // required when TableNames is set
	Streams StreamDescriber // required when StreamARNs is set
	// TableNames must exist; StreamARNs must answer DescribeStream.
	TableNames, StreamARNs []string
	// Endpoint names the endpoint in errors ("" for AWS's own); it is
	// printed with its secrets masked.
	Endpoint string
	// Region is the Region the clients are signed for, named in errors
	// and in each Source ("": not named).
	Region string
	// RequireStream: each table must have a stream enabled.
	RequireStream bool
	// NeedOldImage: something downstream wants removed items (expired or
	// deleted), whose attributes only a view type with the old image
	// carries (OLD_IMAGE, NEW_AND_OLD_IMAGES). A stream without it fails
	// with ErrNoOldImage unless AllowKeysOnly, which logs a WARN instead.
	NeedOldImage, AllowKeysOnly bool
	// WarnTTLOff logs a WARN naming each table whose TTL is off: DynamoDB
	// deletes nothing there, so a consumer that takes only DynamoDB's own
	// deletes for expiries finds none.
	WarnTTLOff bool
	// WaitForTable, when positive, is how long a table that does not exist
	// yet, or has no stream yet (with RequireStream), is waited for,
	// polling with Backoff and logging what it waits for. Other failures
	// end the check at once.
	WaitForTable time.Duration
	// Timeout bounds each call, which is made once, without the SDK's
	// retries. Default SourceTimeout.
	Timeout time.Duration
	// Backoff spaces the polls of WaitForTable. Default 250 ms to 10 s.
	Backoff backoff.Policy
	Logger  *zap.Logger
}

// Source is one table or stream as a check found it.
type Source struct {
	Table     string // "" for a stream ARN whose description names none
	Region    string // SourceCheck.Region
	StreamARN string // the table's latest stream, "" when none is enabled
	// ViewType is the stream's StreamViewType ("" without a stream).
	ViewType string
	// Global is what the table's description says of its replicas (a
	// table checked by name only).
	Global GlobalTable
}

// SourceError says which table or stream failed, and why.
type SourceError struct {
	Table  string // the table checked, or ""
	Region string // the Region checked, or "" (a stream ARN names its own)
	Stream string // the stream ARN checked, or ""
	Err    error
}

// Error is one line naming the table (and Region) or stream and the
// cause, with anything that looks like a secret masked.
func (e *SourceError) Error() string {
	what := "table " + e.Table
	switch {
	case e.Table == "":
		what = "stream " + e.Stream
	case e.Region != "":
		what += " in " + e.Region
	}
	return redact.Text(what + ": " + e.Err.Error())
}

func (e *SourceError) Unwrap() error { return e.Err }

// CheckSources proves that every table exists (and has a stream enabled,
// with RequireStream) and every stream ARN is described, that the endpoint
// answers and takes these credentials, and that each stream carries the
// old image when NeedOldImage. The first failure is a *SourceError. Each
// call is bounded by Timeout and made once, so a failure comes within
// Timeout (plus WaitForTable) even from an endpoint that never answers.
func CheckSources(ctx context.Context, c SourceCheck) ([]Source, error) {
	out, err := CheckTables(ctx, c)
	if err != nil {
		return nil, err
	}
	c = c.withDefaults()
	for _, a := range c.StreamARNs {
		s, err := c.stream(ctx, a)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// CheckTables is CheckSources for c.TableNames alone: a command that only
// writes a table (restore) calls it, and so never needs the right to
// describe a stream.
func CheckTables(ctx context.Context, c SourceCheck) ([]Source, error) {
	c = c.withDefaults()
	var out []Source
	for _, t := range c.TableNames {
		s, err := c.waitTable(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// withDefaults is c with every unset option at its default.
func (c SourceCheck) withDefaults() SourceCheck {
	if c.Timeout <= 0 {
		c.Timeout = SourceTimeout
	}
	if c.Backoff == (backoff.Policy{}) {
		c.Backoff = backoff.Policy{Min: 250 * time.Millisecond, Max: 10 * time.Second}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// waitTable checks a table, polling while it is missing or streamless for
// up to WaitForTable.
func (c *SourceCheck) waitTable(ctx context.Context, name string) (Source, error) {
	deadline := time.Now().Add(c.WaitForTable)
	for n := 0; ; n++ {
		s, err := c.table(ctx, name)
		if err == nil || c.WaitForTable <= 0 || !(errors.Is(err, ErrNoSuchTable) || errors.Is(err, ErrStreamDisabled)) {
			return s, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return s, fmt.Errorf("%w (waited %s for it)", err, c.WaitForTable)
		}
		d := min(c.Backoff.Delay(n), left)
		c.Logger.Info("waiting for the table", zap.String("table", name), zap.String("missing", waitingFor(err)),
			zap.Duration("retry_in", d), zap.Duration("wait_left", left))
		if !backoff.Sleep(ctx, d) {
			return s, &SourceError{Table: name, Region: c.Region, Err: fmt.Errorf("waiting for the table: %w", context.Cause(ctx))}
		}
	}
}

func waitingFor(err error) string {
	if errors.Is(err, ErrNoSuchTable) {
		return "the table"
	}
	return "its stream"
}

// table checks one table: it exists, its stream, its view type, its TTL.
func (c *SourceCheck) table(ctx context.Context, name string) (Source, error) {
	actx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	out, err := c.Tables.DescribeTable(actx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, onceDDB)
	if err != nil {
		return Source{}, &SourceError{Table: name, Region: c.Region, Err: c.failure(ctx, actx, err, ErrNoSuchTable)}
	}
	s := Source{Table: name, Region: c.Region}
	if t := out.Table; t != nil {
		s.Global = globalTable(t, c.Region)
		if t.StreamSpecification != nil && aws.ToBool(t.StreamSpecification.StreamEnabled) {
			s.StreamARN, s.ViewType = aws.ToString(t.LatestStreamArn), string(t.StreamSpecification.StreamViewType)
		}
	}
	if c.RequireStream && s.StreamARN == "" {
		return s, &SourceError{Table: name, Region: c.Region, Err: fmt.Errorf("%w: enable one with `aws dynamodb update-table --table-name %s "+
			"--stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES`", ErrStreamDisabled, name)}
	}
	if s.StreamARN != "" {
		if err := c.viewType(s); err != nil {
			return s, &SourceError{Table: name, Region: c.Region, Err: err}
		}
	}
	if c.WarnTTLOff {
		c.warnTTLOff(actx, name)
	}
	return s, nil
}

// stream checks one explicit stream ARN. A disabled stream passes: its
// records stay readable for the stream's retention.
func (c *SourceCheck) stream(ctx context.Context, arn string) (Source, error) {
	actx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	out, err := c.Streams.DescribeStream(actx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), Limit: aws.Int32(1)}, onceStreams)
	if err != nil {
		return Source{}, &SourceError{Stream: arn, Err: c.failure(ctx, actx, err, ErrNoSuchStream)}
	}
	s := Source{StreamARN: arn}
	if d := out.StreamDescription; d != nil {
		s.Table, s.ViewType = aws.ToString(d.TableName), string(d.StreamViewType)
	}
	if err := c.viewType(s); err != nil {
		return s, &SourceError{Stream: arn, Err: err}
	}
	return s, nil
}

// viewType fails a stream without the old image when removed items are
// wanted, or warns when AllowKeysOnly.
func (c *SourceCheck) viewType(s Source) error {
	if !c.NeedOldImage || CarriesOldImage(s.ViewType) {
		return nil
	}
	if c.AllowKeysOnly {
		c.Logger.Warn("the stream carries no old image: expired and deleted items are archived as their keys alone, marked \"image\":\"keys-only\"",
			zap.String("table", s.Table), zap.String("stream_arn", s.StreamARN), zap.String("view_type", s.ViewType))
		return nil
	}
	table := s.Table
	if table == "" {
		table = "TABLE"
	}
	return fmt.Errorf("%w: view type %s, so expired and deleted items would be archived as their keys alone; "+
		"give the table a stream with NEW_AND_OLD_IMAGES (`aws dynamodb update-table --table-name %s --stream-specification StreamEnabled=false`, "+
		"then `... StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES`; the new stream has a new ARN)",
		ErrNoOldImage, s.ViewType, table)
}

// CarriesOldImage reports whether a stream of view type v carries the old
// image of a changed or removed item.
func CarriesOldImage(v string) bool {
	return v == string(ddbtypes.StreamViewTypeOldImage) || v == string(ddbtypes.StreamViewTypeNewAndOldImages)
}

// warnTTLOff logs a WARN when the table's TTL is off (or cannot be read).
func (c *SourceCheck) warnTTLOff(ctx context.Context, name string) {
	out, err := c.Tables.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)}, onceDDB)
	if err != nil {
		c.Logger.Warn("could not check the table's TTL", zap.String("table", name), zap.Error(err))
		return
	}
	if d := out.TimeToLiveDescription; d != nil &&
		(d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling) {
		return
	}
	c.Logger.Warn("the table's TTL is off: DynamoDB expires nothing there, so no expiries will be archived from it "+
		"(enable TTL, or expire it with archiver sweep and archive with --expired-when past-ttl)", zap.String("table", name))
}

// onceDDB and onceStreams make a call once: the check's bound is its own.
func onceDDB(o *dynamodb.Options)            { o.RetryMaxAttempts = 1 }
func onceStreams(o *dynamodbstreams.Options) { o.RetryMaxAttempts = 1 }

// failure says what a failed call means: notFound for a missing resource,
// ErrCredentials, ErrAccessDenied, ErrUnreachable (refused, unknown host,
// no answer within the call's bound actx), or the error as it came. ctx is
// the caller's: when it ended, that is the cause.
func (c *SourceCheck) failure(ctx, actx context.Context, err, notFound error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); {
		case code == "ResourceNotFoundException":
			return fmt.Errorf("%w: %w", notFound, err)
		case awserr.IsCredentials(err):
			return fmt.Errorf("%w (%s): check the AWS credentials this process uses: %w", ErrCredentials, code, err)
		case code == "AccessDeniedException":
			return fmt.Errorf("%w: the credentials are valid but not allowed this call: %w", ErrAccessDenied, err)
		}
		return err
	}
	ep := c.endpointName()
	var dns *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: %s refused the connection (is anything listening there?): %w", ErrUnreachable, ep, err)
	case errors.As(err, &dns):
		return fmt.Errorf("%w: %s: host %q not found: %w", ErrUnreachable, ep, dns.Name, err)
	case actx.Err() != nil:
		return fmt.Errorf("%w: %s did not answer within %s: %w", ErrUnreachable, ep, c.Timeout, err)
	case errors.As(err, &netErr):
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, ep, err)
	}
	return err
}

func (c *SourceCheck) endpointName() string {
	if c.Endpoint == "" {
		return "the region's AWS endpoint"
	}
	return "endpoint " + redact.URL(c.Endpoint)
}
