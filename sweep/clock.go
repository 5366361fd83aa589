package sweep

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.uber.org/zap"
)

// ErrClockSkew is matched (errors.Is) by the error of a pass that deleted
// nothing because the sweeper's clock disagrees with DynamoDB's by more
// than Config.MaxClockSkew.
var ErrClockSkew = errors.New("sweep: clock skew against DynamoDB exceeds the allowed maximum")

// maxSampleRTT is the slowest round trip whose Date header is used. A
// response's Date says DynamoDB's time to the second at some instant of
// the round trip, so a sample is uncertain by ±(0.5 s + RTT/2): within
// 1 s for the samples used.
const maxSampleRTT = time.Second

// clockLogEvery is how often a pause for skew is logged again while it
// lasts.
const clockLogEvery = time.Minute

// clockCheck estimates the skew of the sweeper's clock (Config.Now)
// against DynamoDB's from the Date header of every response to the
// sweeper's calls. Date has a resolution of one second, so a sample takes
// DynamoDB's time as the middle of that second and ours as the middle of
// the round trip; the latest sample is the estimate.
type clockCheck struct {
	now   func() time.Time
	bound time.Duration // Config.MaxClockSkew; negative: no check
	log   *zap.Logger
	m     *metrics

	mu      sync.Mutex
	have    bool          // a sample was taken
	skew    time.Duration // DynamoDB's clock minus ours
	paused  time.Time     // when the current pause began; zero: not paused
	lastLog time.Time     // when the pause was last logged
}

// option adds the check's middleware to one call.
func (c *clockCheck) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("ArchiverSweepClockCheck", c.handle), middleware.After)
	})
}

// handle times the round trip and samples the response's Date header. It
// is the innermost deserialize step, so it sees the raw response of every
// attempt, error responses included.
func (c *clockCheck) handle(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	sent := c.now()
	out, md, err := next.HandleDeserialize(ctx, in)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok {
		c.sample(sent, c.now(), resp.Header.Get("Date"))
	}
	return out, md, err
}

// sample records the skew one response shows: nothing when it has no
// valid Date or its round trip (on our clock) was negative or slower than
// maxSampleRTT.
func (c *clockCheck) sample(sent, recv time.Time, date string) {
	rtt := recv.Sub(sent)
	if date == "" || rtt < 0 || rtt > maxSampleRTT {
		return
	}
	d, err := http.ParseTime(date)
	if err != nil {
		return
	}
	skew := d.Add(500 * time.Millisecond).Sub(sent.Add(rtt / 2))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.have, c.skew = true, skew
	c.m.clockSkew.Set(skew.Seconds()) // under the lock: the gauge is the estimate
}

// trusted reports whether deletes may be sent: the check is off, or the
// latest sample is within the bound.
func (c *clockCheck) trusted() bool {
	if c.bound < 0 {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.have && c.skew.Abs() <= c.bound
}

// pausing counts a pass that held its deletes back and logs it: at once
// when a pause begins, then every clockLogEvery while it lasts.
func (c *clockCheck) pausing() {
	c.m.clockPaused.Inc()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused.IsZero() && now.Sub(c.lastLog) < clockLogEvery && now.Sub(c.lastLog) >= 0 {
		return
	}
	if c.paused.IsZero() {
		c.paused = now
	}
	c.lastLog = now
	if !c.have {
		c.log.Warn("sweep: deletes paused: DynamoDB's responses carried no usable Date header yet, so this clock cannot be checked against DynamoDB's (--max-clock-skew 0 turns the check off)",
			zap.Duration("max_clock_skew", c.bound), zap.Time("paused_since", c.paused))
		return
	}
	c.log.Warn("sweep: deletes paused: this clock disagrees with DynamoDB's (its Date header) by more than the bound; they resume when it agrees again",
		zap.Duration("skew", c.skew), zap.String("skew_means", "DynamoDB's clock minus this one"),
		zap.Duration("max_clock_skew", c.bound), zap.Time("paused_since", c.paused))
}

// resumed logs the end of a pause, if one was going on.
func (c *clockCheck) resumed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused.IsZero() {
		return
	}
	c.log.Info("sweep: deletes resumed: this clock agrees with DynamoDB's again",
		zap.Duration("skew", c.skew), zap.Time("paused_since", c.paused))
	c.paused = time.Time{}
}

// estimate is the latest skew, DynamoDB's clock minus ours, and whether
// there is one.
func (c *clockCheck) estimate() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skew, c.have
}
