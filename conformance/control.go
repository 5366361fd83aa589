package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Control is the control API of this project's engine (docs/ENGINE.md,
// "Control API"): JSON over HTTP under /_engine/ on the engine's own
// port. The checks use it to sweep TTL now instead of waiting for the
// sweeper, to read and move the engine's clock, to close shards and to
// trim streams. Any other endpoint has none; the checks then wait.
type Control struct {
	base   string // the endpoint, without a trailing slash
	client *http.Client
}

// NewControl is the control API of the engine at endpoint
// (http://127.0.0.1:8000).
func NewControl(endpoint string) *Control {
	return &Control{base: strings.TrimRight(endpoint, "/"), client: &http.Client{Timeout: time.Minute}}
}

// errNoManualClock is the engine's answer to moving a clock that is real
// time (409): the engine was started without --manual-clock.
var errNoManualClock = errors.New("the engine's clock is real time (start it with --manual-clock to move it)")

// Sweep deletes every item whose TTL has passed, now.
func (c *Control) Sweep(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/_engine/ttl/sweep", struct{}{}, nil)
}

// Now is the engine's clock.
func (c *Control) Now(ctx context.Context) (time.Time, error) {
	var out struct {
		Now time.Time `json:"now"`
	}
	err := c.call(ctx, http.MethodGet, "/_engine/clock", nil, &out)
	return out.Now, err
}

// Advance moves a manual clock d ahead; errNoManualClock when the clock
// is real time.
func (c *Control) Advance(ctx context.Context, d time.Duration) error {
	return c.call(ctx, http.MethodPost, "/_engine/clock", map[string]string{"advance": d.String()}, nil)
}

// ExpireIterators makes every shard iterator issued so far expired.
func (c *Control) ExpireIterators(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/_engine/iterators/expire", struct{}{}, nil)
}

// Rollover closes every open shard of the table's stream in region and
// opens a child for each.
func (c *Control) Rollover(ctx context.Context, table, region string) error {
	return c.call(ctx, http.MethodPost, tablePath(table, region, "rollover"), struct{}{}, nil)
}

// Trim drops the records of the table's stream in region that were made
// before before.
func (c *Control) Trim(ctx context.Context, table, region string, before time.Time) error {
	return c.call(ctx, http.MethodPost, tablePath(table, region, "trim"), map[string]string{"before": before.UTC().Format(time.RFC3339Nano)}, nil)
}

func tablePath(table, region, action string) string {
	return "/_engine/tables/" + url.PathEscape(table) + "/" + action + "?region=" + url.QueryEscape(region)
}

// call sends one control request (in as its JSON body, when not nil) and
// decodes a 200's body into out (when not nil); any other status is an
// error carrying the engine's {"error"} text.
func (c *Control) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("control %s: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("control %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("control %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		if resp.StatusCode == http.StatusConflict && path == "/_engine/clock" {
			return errNoManualClock
		}
		return fmt.Errorf("control %s %s: %s: %s (is the endpoint this project's engine? --engine-control needs it)", method, path, resp.Status, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("control %s: the answer %q: %w", path, data, err)
		}
	}
	return nil
}
