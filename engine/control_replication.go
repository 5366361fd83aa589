package engine

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The control API's replication endpoints, /_engine/replication
// (delay, pause, resume, wait) and its view in GET /_engine/state.

// controlReplication serves POST /_engine/replication ({"delay": "2s"},
// {"pause": REGION}, {"resume": REGION}, any together, checked whole
// before any applies) and POST /_engine/replication/wait.
func (e *Engine) controlReplication(r *http.Request, rest []string) (any, error) {
	switch {
	case len(rest) == 1 && rest[0] == "wait":
		return e.controlReplicationWait(r)
	case len(rest) != 0:
		return nil, controlErrf(http.StatusNotFound, "no control endpoint %s %s", r.Method, r.URL.Path)
	}
	var in struct {
		Delay  *string `json:"delay"`
		Pause  *string `json:"pause"`
		Resume *string `json:"resume"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	var delay time.Duration
	if in.Delay != nil {
		var err error
		if delay, err = time.ParseDuration(*in.Delay); err != nil || delay < 0 {
			return nil, controlErrf(http.StatusBadRequest, `"delay": %q is not a duration of 0 or more like 2s`, *in.Delay)
		}
	}
	if err := e.checkReplicationRegions(in.Pause, in.Resume); err != nil {
		return nil, err
	}
	if in.Delay != nil {
		e.SetReplicationDelay(delay)
	}
	if in.Pause != nil {
		e.PauseReplication(*in.Pause)
	}
	if in.Resume != nil {
		e.ResumeReplication(*in.Resume)
	}
	if err := e.keepControl(); err != nil {
		return nil, err
	}
	return e.Replication().view(), nil
}

// checkReplicationRegions refuses a pause or resume that names no Region
// of this engine (one holding a table, Options.Region, or one paused: a
// misspelt name would otherwise hold nothing back, or release nothing,
// and say nothing), or the same Region for both.
func (e *Engine) checkReplicationRegions(pause, resume *string) error {
	if pause != nil && resume != nil && *pause == *resume {
		return controlErrf(http.StatusBadRequest, `"pause" and "resume" both name %q: give one of them`, *pause)
	}
	known := append(e.Regions(), e.Replication().Paused...)
	for _, f := range []struct {
		name string
		v    *string
	}{{"pause", pause}, {"resume", resume}} {
		switch {
		case f.v == nil:
		case !validRegion(*f.v):
			return controlErrf(http.StatusBadRequest, `"%s": %q is not a Region name: 1 to 63 lower-case letters, digits and hyphens, e.g. eu-west-1`, f.name, *f.v)
		case !slices.Contains(known, *f.v):
			return controlErrf(http.StatusBadRequest, `"%s": %q is not a Region of this engine, whose Regions are %s (those holding a table, and --region: GET /_engine/state lists them)`,
				f.name, *f.v, strings.Join(e.Regions(), ", "))
		}
	}
	return nil
}

// controlReplicationWait serves POST /_engine/replication/wait
// ({"timeout": "30s"}): it answers once replication has nothing it can
// apply now, 409 if it still has when the timeout ends.
func (e *Engine) controlReplicationWait(r *http.Request) (any, error) {
	var in struct {
		Timeout *string `json:"timeout"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	d := 30 * time.Second
	if in.Timeout != nil {
		var err error
		if d, err = time.ParseDuration(*in.Timeout); err != nil || d <= 0 {
			return nil, controlErrf(http.StatusBadRequest, `"timeout": %q is not a positive duration like 30s`, *in.Timeout)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	defer cancel()
	if err := e.WaitReplication(ctx); err != nil {
		return nil, controlErrf(http.StatusConflict, "replication is not idle after %v: %v", d, err)
	}
	return e.Replication().view(), nil
}

// view is the JSON of the replication state.
func (s ReplicationState) view() map[string]any {
	return map[string]any{"delay": s.Delay.String(), "paused": s.Paused, "queued": s.Queued}
}
