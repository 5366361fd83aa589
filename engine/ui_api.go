package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// The console's JSON endpoints, under /_engine/ui/api/:
//
//	GET  overview                  the clock, the Regions and every table
//	GET  stream?region=R&table=T   a table's latest stream: shards, lineage, records
//	POST call {"region","op","input"}  an item operation in a Region
//
// The console does not call the DynamoDB API itself: a browser cannot
// sign a request with SigV4, and the engine takes a request's Region from
// its signature's credential scope (unsigned ones are in Options.Region).
// call runs the operation's own handler in the Region named, after the
// same model check, and answers as the DynamoDB API does (its errors are
// DynamoDB's error documents); it skips Hooks.OnRequest, so a test's
// injected faults are neither met nor used up by the console.

// uiStreamRecords is how many of each shard's latest records the stream
// endpoint returns, and uiStreamBytes how many bytes of them at most.
const (
	uiStreamRecords = 100
	uiStreamBytes   = 2 << 20
)

// uiOps are the operations the call endpoint runs.
var uiOps = map[string]bool{"Scan": true, "Query": true, "GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true}

// serveUIAPI routes one request of the console's JSON endpoints.
func (e *Engine) serveUIAPI(w http.ResponseWriter, r *http.Request, name string) {
	method := http.MethodGet
	if name == "call" {
		method = http.MethodPost
	}
	switch {
	case name != "overview" && name != "stream" && name != "call":
		writeControl(w, http.StatusNotFound, map[string]string{"error": "no console endpoint " + r.URL.Path + ": overview, stream and call are"})
	case r.Method != method:
		w.Header().Set("Allow", method)
		writeControl(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " " + r.URL.Path + ": method not allowed (use " + method + ")"})
	case name == "overview":
		writeControl(w, http.StatusOK, e.uiOverview())
	case name == "stream":
		v, err := e.uiStream(r)
		if err != nil {
			writeControl(w, err.status, map[string]string{"error": err.msg})
			return
		}
		writeControl(w, http.StatusOK, v)
	default:
		e.uiCall(w, r)
	}
}

// uiTable is one table of the overview: its DescribeTable and its TTL
// attribute.
type uiTable struct {
	Region       string           `json:"region"`
	TTLAttribute string           `json:"ttlAttribute,omitempty"` // "" when TTL is off
	Table        tableDescription `json:"table"`
}

// uiOverview is what the console polls: the engine's clock and tables.
type uiOverview struct {
	Now         time.Time `json:"now"`
	ManualClock bool      `json:"manualClock"` // the clock moves only through POST /_engine/clock
	Region      string    `json:"region"`      // Options.Region, of unsigned requests
	Regions     []string  `json:"regions"`
	TTLSweep    string    `json:"ttlSweep"` // the background sweeper's interval, or "off"
	Tables      []uiTable `json:"tables"`   // by Region, then name
}

// uiOverview returns the overview.
func (e *Engine) uiOverview() uiOverview {
	_, manual := e.clock.(*ManualClock)
	o := uiOverview{Now: e.clock.Now().UTC(), ManualClock: manual, Region: e.o.Region, Regions: e.Regions(), TTLSweep: "off", Tables: []uiTable{}}
	if e.o.TTLInterval > 0 {
		o.TTLSweep = e.o.TTLInterval.String()
	}
	for _, t := range e.sortedTables() {
		t.mu.RLock()
		o.Tables = append(o.Tables, uiTable{Region: t.region, TTLAttribute: t.ttlAttr, Table: t.describeLocked()})
		t.mu.RUnlock()
	}
	return o
}

// uiStreamView is the stream endpoint's answer.
type uiStreamView struct {
	Region  string      `json:"region"`
	Table   string      `json:"table"`
	Enabled bool        `json:"enabled"` // the latest stream is the table's current one
	Stream  stream.View `json:"stream"`
}

// uiStream serves GET stream?region=R&table=T: the table's latest stream.
func (e *Engine) uiStream(r *http.Request) (*uiStreamView, *controlError) {
	q := r.URL.Query()
	ctx, region, ce := e.uiRegion(r.Context(), q.Get("region"))
	if ce != nil {
		return nil, ce
	}
	name := q.Get("table")
	if err := checkTableName(name, "table"); err != nil {
		return nil, controlErrf(http.StatusBadRequest, "table: %v", err)
	}
	t, err := e.lookup(ctx, name)
	if err != nil {
		return nil, controlErrf(http.StatusNotFound, "no table %.300q in %s", name, region)
	}
	t.mu.RLock()
	latest, enabled := t.latest, t.stream != nil
	t.mu.RUnlock()
	if latest == nil {
		return nil, controlErrf(http.StatusNotFound, "table %.300q in %s has no stream", name, region)
	}
	return &uiStreamView{Region: region, Table: name, Enabled: enabled, Stream: latest.View(uiStreamRecords, uiStreamBytes)}, nil
}

// uiRegion returns ctx acting in region (Options.Region when ""), or a
// 400 naming a region that is not a Region's name.
func (e *Engine) uiRegion(ctx context.Context, region string) (context.Context, string, *controlError) {
	if region == "" {
		region = e.o.Region
	}
	if !validRegion(region) {
		return nil, "", controlErrf(http.StatusBadRequest, "region=%.100q is not a Region name: 1 to 63 lower-case letters, digits and hyphens, e.g. us-west-2", region)
	}
	return withRegion(ctx, region), region, nil
}

// uiCall serves POST call: {"region": R, "op": "Scan", "input": {...}}
// runs the operation as the DynamoDB API would in Region R, and answers
// as it would.
func (e *Engine) uiCall(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Region string          `json:"region"`
		Op     string          `json:"op"`
		Input  json.RawMessage `json:"input"`
	}
	if err := decodeControl(r, &in); err != nil {
		writeControl(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	ctx, _, ce := e.uiRegion(r.Context(), in.Region)
	if ce == nil && !uiOps[in.Op] {
		ce = controlErrf(http.StatusBadRequest, `"op": %.100q is not one the console runs: Scan, Query, GetItem, PutItem, UpdateItem or DeleteItem`, in.Op)
	}
	if ce != nil {
		writeControl(w, ce.status, map[string]string{"error": ce.msg})
		return
	}
	body := []byte(in.Input)
	if len(body) == 0 || string(body) == "null" {
		body = []byte("{}")
	}
	if err := checkModel(false, in.Op, body); err != nil {
		e.writeError(w, err, 0)
		return
	}
	resp, err := ops[in.Op](e, ctx, body)
	if e.notSynced(w, in.Op, false, err) {
		return
	}
	if err != nil {
		e.writeError(w, err, 0)
		return
	}
	e.writeResponse(w, in.Op, resp)
}
