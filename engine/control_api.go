package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// controlPrefix is the path under which the engine serves its control API.
const controlPrefix = "/_engine/"

// maxControlBody bounds a control request's body.
const maxControlBody = 1 << 20

// controlError is a control API failure: an HTTP status and a message sent
// as {"error": msg}.
type controlError struct {
	status int
	msg    string
}

func (c *controlError) Error() string { return c.msg }

func controlErrf(status int, format string, args ...any) *controlError {
	return &controlError{status: status, msg: fmt.Sprintf(format, args...)}
}

// controlAllowed reports whether a request from remoteAddr (host:port, as
// in http.Request.RemoteAddr) may use the control API: loopback clients
// always, others only within Options.ControlFrom.
func (e *Engine) controlAllowed(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	var addr netip.Addr
	if err == nil {
		addr = ap.Addr()
	} else if addr, err = netip.ParseAddr(remoteAddr); err != nil {
		return false
	}
	addr = addr.Unmap()
	if addr.IsLoopback() {
		return true
	}
	for _, p := range e.o.ControlFrom {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// serveControl serves the control API under /_engine/: JSON in and out,
// errors as {"error": "..."} with 400, 403, 404, 405, 408, 409 or 415.
func (e *Engine) serveControl(w http.ResponseWriter, r *http.Request) {
	defer e.controlPanic(w, r)
	if !e.admitControl(w, r) {
		return
	}
	w = e.durableWriter(w, r)
	resp, err := e.control(r)
	if err != nil {
		var ce *controlError
		if !errors.As(err, &ce) {
			ce = e.controlFault(err)
		}
		if ce.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", allowOf(r.URL.Path))
		}
		writeControl(w, ce.status, map[string]string{"error": ce.msg})
		return
	}
	if resp == nil {
		resp = struct{}{}
	}
	writeControl(w, http.StatusOK, resp)
}

// controlPanic, deferred by a handler under /_engine/, answers a panic
// with a 500 and logs it with its stack.
func (e *Engine) controlPanic(w http.ResponseWriter, r *http.Request) {
	if p := recover(); p != nil {
		e.log.Error("engine: panic serving control request", zap.String("path", r.URL.Path),
			zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		writeControl(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
	}
}

// admitControl applies the guards of a request under /_engine/ (the
// control API and the console) and reports whether it may go on: a client
// that is loopback or of Options.ControlFrom, and for a POST one no web
// page of another site could send (checkControlPost), whose body arrives
// whole and in time (it is then in r.Body). A refused request is answered.
func (e *Engine) admitControl(w http.ResponseWriter, r *http.Request) bool {
	if !e.controlAllowed(r.RemoteAddr) {
		e.logRefusal(&e.guardLog.controlFrom, "control request refused for its client address", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path))
		writeControl(w, http.StatusForbidden, map[string]string{
			"error": "control API refused for client " + r.RemoteAddr + ": only loopback clients, or those allowed by --control-from CIDR",
		})
		return false
	}
	if r.Method != http.MethodPost {
		return true
	}
	if ce := checkControlPost(r); ce != nil {
		e.logRefusal(&e.guardLog.controlPost, "control request refused as one a web page could send", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path), zap.Error(ce))
		writeControl(w, ce.status, map[string]string{"error": ce.msg})
		return false
	}
	body, err := e.readBody(w, r, maxControlBody)
	if err != nil {
		ce := controlErrf(http.StatusBadRequest, "reading the request body: %v", err)
		switch {
		case errors.Is(err, errBodyTooLarge):
			ce.msg = fmt.Sprintf("request body exceeds %d bytes", maxControlBody)
		case errors.Is(err, os.ErrDeadlineExceeded):
			ce.status = http.StatusRequestTimeout
		}
		writeControl(w, ce.status, map[string]string{"error": ce.msg})
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// controlFault maps an error of a fault-injection method to a status:
// unknown tables, streams and shards are 404, the rest (a disabled stream,
// a closed shard) 409.
func (e *Engine) controlFault(err error) *controlError {
	var pe *Error
	var ae *awserr.Error
	switch {
	case errors.Is(err, stream.ErrNotFound),
		errors.As(err, &pe) && pe.Code == awserr.CodeResourceNotFound,
		errors.As(err, &ae) && ae.Code == awserr.CodeResourceNotFound:
		return controlErrf(http.StatusNotFound, "%s", strings.TrimPrefix(err.Error(), awserr.CodeResourceNotFound+": "))
	default:
		return controlErrf(http.StatusConflict, "%s", err.Error())
	}
}

func writeControl(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// allowOf returns the methods a control path accepts.
func allowOf(path string) string {
	switch strings.TrimSuffix(path, "/") {
	case controlPrefix + "clock":
		return "GET, POST"
	case controlPrefix + "state":
		return "GET"
	}
	return "POST"
}

// keepControl saves the control state after a change (saveControl); a
// failure is a 503: the change is made, but a restart would lose it.
func (e *Engine) keepControl() error {
	if err := e.saveControl(); err != nil {
		return controlErrf(http.StatusServiceUnavailable, "done, but not kept for a restart: %v", err)
	}
	return nil
}

// control routes one control request and returns its response body.
func (e *Engine) control(r *http.Request) (any, error) {
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, controlPrefix), "/"), "/")
	if len(parts) >= 3 && parts[0] == "tables" && parts[1] != "" {
		ref, err := e.controlTable(r, parts[1])
		if err != nil {
			return nil, err
		}
		parts[1] = ref
	}
	table := len(parts) >= 3 && parts[0] == "tables" && parts[1] != ""
	shard := table && len(parts) == 5 && parts[2] == "shards" && parts[3] != ""
	switch {
	case len(parts) == 2 && parts[0] == "ttl" && parts[1] == "sweep":
		return e.controlSweep(r)
	case len(parts) == 1 && parts[0] == "clock":
		resp, err := e.controlClock(r)
		if err == nil && r.Method == http.MethodPost {
			t := e.clock.Now()
			e.clockSet.Store(&t)
			err = e.keepControl()
		}
		return resp, err
	case len(parts) == 1 && parts[0] == "state":
		if r.Method != http.MethodGet {
			return nil, controlErrf(http.StatusMethodNotAllowed, "%s %s: method not allowed (use GET)", r.Method, r.URL.Path)
		}
		return e.stateView(), nil
	case len(parts) == 2 && parts[0] == "iterators" && parts[1] == "expire":
		return e.controlExpireIterators(r)
	case len(parts) >= 1 && parts[0] == "replication":
		if err := requirePost(r); err != nil {
			return nil, err
		}
		return e.controlReplication(r, parts[1:])
	case len(parts) == 2 && parts[0] == "ttl" && parts[1] == "independent":
		return e.controlTTLIndependent(r)
	case len(parts) == 1 && parts[0] == "throttle":
		return e.controlThrottle(r)
	case table && len(parts) == 3 && parts[2] == "rollover":
		return e.controlRollover(r, parts[1])
	case table && len(parts) == 3 && parts[2] == "trim":
		return e.controlTrim(r, parts[1])
	case shard && parts[4] == "split":
		return e.controlSplit(r, parts[1], parts[3])
	case shard && parts[4] == "omit":
		return e.controlOmit(r, parts[1], parts[3])
	case shard && parts[4] == "records":
		if err := requirePost(r); err != nil {
			return nil, err
		}
		return e.controlRecord(r, parts[1], parts[3])
	}
	return nil, controlErrf(http.StatusNotFound, "no control endpoint %s %s", r.Method, r.URL.Path)
}

// requirePost refuses a control request that is not a POST (405).
func requirePost(r *http.Request) error {
	if r.Method != http.MethodPost {
		return controlErrf(http.StatusMethodNotAllowed, "%s %s: method not allowed (use POST)", r.Method, r.URL.Path)
	}
	return nil
}

// requireEmptyPost refuses a control request that is not a POST of an
// empty JSON object, for endpoints that take no parameters.
func requireEmptyPost(r *http.Request) error {
	if err := requirePost(r); err != nil {
		return err
	}
	return decodeControl(r, &struct{}{})
}

// controlSweep serves POST /_engine/ttl/sweep: one TTL sweep now.
func (e *Engine) controlSweep(r *http.Request) (any, error) {
	if err := requireEmptyPost(r); err != nil {
		return nil, err
	}
	n, err := e.SweepTTL(r.Context())
	if isRefused(err) { // a full disk: retryable, and the items left are still there
		return nil, controlErrf(http.StatusServiceUnavailable, "ttl sweep: deleted %d items, then: %v", n, err)
	}
	if err != nil {
		return nil, controlErrf(http.StatusConflict, "ttl sweep: %v", err)
	}
	return map[string]int{"deleted": n}, nil
}

// controlExpireIterators serves POST /_engine/iterators/expire.
func (e *Engine) controlExpireIterators(r *http.Request) (any, error) {
	if err := requireEmptyPost(r); err != nil {
		return nil, err
	}
	e.ExpireIterators()
	return nil, e.keepControl()
}

// controlTTLIndependent serves POST /_engine/ttl/independent.
func (e *Engine) controlTTLIndependent(r *http.Request) (any, error) {
	if err := requirePost(r); err != nil {
		return nil, err
	}
	var in struct {
		Enabled *bool `json:"enabled"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	if in.Enabled == nil {
		return nil, controlErrf(http.StatusBadRequest, `"enabled" is required: true makes every Region's TTL delete every expired item of a global table`)
	}
	e.SetTTLIndependent(*in.Enabled)
	return nil, e.keepControl()
}

// controlTable returns how the Go API names the table of a control path
// /_engine/tables/{table}/...: its name in Options.Region, or, with the
// query parameter region=REGION, its ARN in that Region.
func (e *Engine) controlTable(r *http.Request, name string) (string, error) {
	q := r.URL.Query()
	region := q.Get("region")
	if _, ok := q["region"]; !ok {
		return name, nil
	}
	if !validRegion(region) {
		return "", controlErrf(http.StatusBadRequest, "region=%q is not a Region name: 1 to 63 lower-case letters, digits and hyphens, e.g. us-west-2", region)
	}
	return e.tableARN(region, name), nil
}

// InjectedRecord is a stream record of a test's choosing (see
// InjectRecord). Keys, NewImage and OldImage are JSON objects, normally
// DynamoDB JSON ({"pk":{"S":"a"}}), kept as given; nil images are absent.
type InjectedRecord struct {
	EventName                string
	Keys, NewImage, OldImage json.RawMessage
	SizeBytes                int  // negative: the images' JSON length
	Service                  bool // userIdentity of a TTL delete
}

// InjectRecord appends rec to one open shard of the table's latest stream,
// whatever shard its key hashes to, and returns its sequence number: a
// poison record for a consumer's tests. The images are not checked
// against the table or the view type.
func (e *Engine) InjectRecord(table, shardID string, rec InjectedRecord) (string, error) {
	arn, err := e.streamARN(table)
	if err != nil {
		return "", public(err)
	}
	var nw, old []byte
	if rec.NewImage != nil {
		nw = rec.NewImage
	}
	if rec.OldImage != nil {
		old = rec.OldImage
	}
	seq, err := e.streams.Inject(arn, shardID, stream.EncodedChange{
		EventName: rec.EventName, Keys: rec.Keys, New: nw, Old: old, Size: rec.SizeBytes, Service: rec.Service,
	})
	return seq, public(err)
}

// controlRecord serves POST /_engine/tables/{table}/shards/{shard}/records.
func (e *Engine) controlRecord(r *http.Request, table, shardID string) (any, error) {
	var in struct {
		EventName *string `json:"eventName"`
		Dynamodb  *struct {
			Keys      json.RawMessage `json:"Keys"`
			NewImage  json.RawMessage `json:"NewImage"`
			OldImage  json.RawMessage `json:"OldImage"`
			SizeBytes *int            `json:"SizeBytes"`
		} `json:"dynamodb"`
		UserIdentity *struct {
			Type        string `json:"Type"`
			PrincipalID string `json:"PrincipalId"`
		} `json:"userIdentity"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	if in.EventName == nil || *in.EventName == "" {
		return nil, controlErrf(http.StatusBadRequest, `"eventName" is required: INSERT, MODIFY, REMOVE or any string`)
	}
	if in.Dynamodb == nil || len(in.Dynamodb.Keys) == 0 {
		return nil, controlErrf(http.StatusBadRequest, `"dynamodb.Keys" is required: a JSON object such as {"pk":{"S":"a"}}`)
	}
	rec := InjectedRecord{EventName: *in.EventName, SizeBytes: -1}
	d := in.Dynamodb
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *json.RawMessage
	}{{"Keys", d.Keys, &rec.Keys}, {"NewImage", d.NewImage, &rec.NewImage}, {"OldImage", d.OldImage, &rec.OldImage}} {
		t := bytes.TrimSpace(f.raw)
		if len(t) == 0 || string(t) == "null" {
			continue
		}
		if t[0] != '{' {
			return nil, controlErrf(http.StatusBadRequest, `"dynamodb.%s" must be a JSON object`, f.name)
		}
		*f.dst = t
	}
	if rec.Keys == nil {
		return nil, controlErrf(http.StatusBadRequest, `"dynamodb.Keys" is required: a JSON object such as {"pk":{"S":"a"}}`)
	}
	if d.SizeBytes != nil {
		if *d.SizeBytes < 0 {
			return nil, controlErrf(http.StatusBadRequest, `"dynamodb.SizeBytes" must not be negative, got %d`, *d.SizeBytes)
		}
		rec.SizeBytes = *d.SizeBytes
	}
	if u := in.UserIdentity; u != nil {
		if u.Type != "Service" || u.PrincipalID != "dynamodb.amazonaws.com" {
			return nil, controlErrf(http.StatusBadRequest, `"userIdentity": only {"Type":"Service","PrincipalId":"dynamodb.amazonaws.com"} (a TTL delete) is supported`)
		}
		rec.Service = true
	}
	seq, err := e.InjectRecord(table, shardID, rec)
	if err != nil {
		return nil, err
	}
	return map[string]string{"sequenceNumber": seq}, nil
}

// controlClock serves GET and POST /_engine/clock.
func (e *Engine) controlClock(r *http.Request) (any, error) {
	now := func(t time.Time) any { return map[string]string{"now": t.UTC().Format(time.RFC3339Nano)} }
	switch r.Method {
	case http.MethodGet:
		return now(e.clock.Now()), nil
	case http.MethodPost:
	default:
		return nil, controlErrf(http.StatusMethodNotAllowed, "%s %s: method not allowed (use GET or POST)", r.Method, r.URL.Path)
	}
	mc, ok := e.clock.(*ManualClock)
	if !ok {
		return nil, controlErrf(http.StatusConflict, "the engine's clock is real time and cannot be moved: start it with --manual-clock (Options.Clock = a ManualClock)")
	}
	var in struct {
		Set     *string `json:"set"`
		Advance *string `json:"advance"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	switch {
	case in.Set != nil && in.Advance != nil:
		return nil, controlErrf(http.StatusBadRequest, `give one of "set" and "advance", not both`)
	case in.Set != nil:
		t, err := time.Parse(time.RFC3339Nano, *in.Set)
		if err != nil {
			return nil, controlErrf(http.StatusBadRequest, `"set": %q is not an RFC 3339 time like 2026-11-01T12:00:00Z`, *in.Set)
		}
		mc.Set(t)
		return now(t), nil
	case in.Advance != nil:
		d, err := time.ParseDuration(*in.Advance)
		if err != nil {
			return nil, controlErrf(http.StatusBadRequest, `"advance": %q is not a duration like 90s or 1h30m`, *in.Advance)
		}
		if d < 0 {
			return nil, controlErrf(http.StatusBadRequest, `"advance": %q must not be negative; use "set" to move the clock back`, *in.Advance)
		}
		return now(mc.Advance(d)), nil
	default:
		return nil, controlErrf(http.StatusBadRequest, `give "set" (an RFC 3339 time) or "advance" (a duration like 90s)`)
	}
}

// decodeControl reads a JSON object into v, rejecting unknown fields. An
// empty body is an empty object.
func decodeControl(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	if err != nil {
		return controlErrf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(body) > maxControlBody {
		return controlErrf(http.StatusBadRequest, "request body exceeds %d bytes", maxControlBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return controlErrf(http.StatusBadRequest, "%q: want a %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return controlErrf(http.StatusBadRequest, "unknown field %s", f)
		}
		return controlErrf(http.StatusBadRequest, "the request body is not a JSON object: %v", err)
	}
	if dec.More() {
		return controlErrf(http.StatusBadRequest, "the request body holds more than one JSON value")
	}
	return nil
}
