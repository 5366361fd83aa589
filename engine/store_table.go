package engine

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// entry is one stored item. Entries are immutable once stored, except exp,
// which changes only under the table's write lock.
type entry struct {
	key  []byte // table storage key
	raw  []byte // the item's DynamoDB JSON
	size int32  // DynamoDB item size in bytes
	exp  int64  // TTL expiry in unix nanoseconds; noExpiry when none
}

const noExpiry = math.MinInt64

// index is a GSI or an LSI.
type index struct {
	name     string
	global   bool
	key      keyDef
	projType string   // ALL, KEYS_ONLY, INCLUDE
	nonKey   []string // INCLUDE's NonKeyAttributes
	rcu, wcu int64
	list     *skiplist
	size     int64
	arn      string
	created  time.Time
}

// table is one table: its schema, its items and its indexes. mu guards
// everything below it; writes and their stream Append happen under the
// write lock, so a key's stream records are in commit order.
type table struct {
	name    string
	region  string // the Region it is in (Options.Region or a request's credential scope)
	arn     string
	id      string
	created time.Time

	mu         sync.RWMutex
	key        keyDef
	attrDefs   map[string]attr.Type
	billing    string
	rcu, wcu   int64
	gsis       []*index
	lsis       []*index
	items      *skiplist
	size       int64
	ttlAttr    string // "" when TTL is disabled
	stream     *stream.Stream
	latest     *stream.Stream // latest stream, enabled or not
	deletion   bool
	tags       tagList
	tableClass string
	lagNanos   int64

	scratch sync.Pool  // *[]byte buffers for encoding items
	ktoks   []attrTok  // key attributes' JSON tokens, in encoder order (set at creation)
	p       *persister // logs the table's changes; nil without Options.DataDir
	// tx is set, under mu, while a transaction applies its actions:
	// writeLocked collects their writes there, to be logged as one entry
	// and only then applied (txWrites.commit).
	tx *txWrites
	// repl is the replication state of a global table's replica, nil for
	// any other table (global_replica.go); mu guards it.
	repl *replState
}

// tkey is the table's key in Engine.tables.
func (t *table) tkey() tkey { return tkey{t.region, t.name} }

// indexByName returns the named index or nil.
func (t *table) indexByName(name string) *index {
	for _, ix := range t.gsis {
		if ix.name == name {
			return ix
		}
	}
	for _, ix := range t.lsis {
		if ix.name == name {
			return ix
		}
	}
	return nil
}

// ---- wire types ----

type keySchemaElement struct {
	AttributeName string `json:"AttributeName"`
	KeyType       string `json:"KeyType"`
}

type attributeDefinition struct {
	AttributeName string `json:"AttributeName"`
	AttributeType string `json:"AttributeType"`
}

type projectionSpec struct {
	ProjectionType   string   `json:"ProjectionType,omitempty"`
	NonKeyAttributes []string `json:"NonKeyAttributes,omitempty"`
}

type throughput struct {
	ReadCapacityUnits  *int64 `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits *int64 `json:"WriteCapacityUnits,omitempty"`
}

type indexSpec struct {
	IndexName             string             `json:"IndexName"`
	KeySchema             []keySchemaElement `json:"KeySchema"`
	Projection            *projectionSpec    `json:"Projection"`
	ProvisionedThroughput *throughput        `json:"ProvisionedThroughput"`
}

type streamSpec struct {
	StreamEnabled  *bool  `json:"StreamEnabled,omitempty"`
	StreamViewType string `json:"StreamViewType,omitempty"`
}

type createTableRequest struct {
	TableName                 string                `json:"TableName"`
	KeySchema                 []keySchemaElement    `json:"KeySchema"`
	AttributeDefinitions      []attributeDefinition `json:"AttributeDefinitions"`
	GlobalSecondaryIndexes    []indexSpec           `json:"GlobalSecondaryIndexes"`
	LocalSecondaryIndexes     []indexSpec           `json:"LocalSecondaryIndexes"`
	BillingMode               string                `json:"BillingMode"`
	ProvisionedThroughput     *throughput           `json:"ProvisionedThroughput"`
	StreamSpecification       *streamSpec           `json:"StreamSpecification"`
	Tags                      []tagIn               `json:"Tags"`
	TableClass                string                `json:"TableClass"`
	DeletionProtectionEnabled bool                  `json:"DeletionProtectionEnabled"`
}

type throughputDesc struct {
	NumberOfDecreasesToday int64 `json:"NumberOfDecreasesToday"`
	ReadCapacityUnits      int64 `json:"ReadCapacityUnits"`
	WriteCapacityUnits     int64 `json:"WriteCapacityUnits"`
}

type indexDesc struct {
	IndexName             string             `json:"IndexName"`
	KeySchema             []keySchemaElement `json:"KeySchema"`
	Projection            projectionSpec     `json:"Projection"`
	IndexStatus           string             `json:"IndexStatus,omitempty"`
	ProvisionedThroughput *throughputDesc    `json:"ProvisionedThroughput,omitempty"`
	IndexSizeBytes        int64              `json:"IndexSizeBytes"`
	ItemCount             int64              `json:"ItemCount"`
	IndexArn              string             `json:"IndexArn"`
}

type billingSummary struct {
	BillingMode                       string  `json:"BillingMode"`
	LastUpdateToPayPerRequestDateTime float64 `json:"LastUpdateToPayPerRequestDateTime,omitempty"`
}

type tableDescription struct {
	AttributeDefinitions      []attributeDefinition `json:"AttributeDefinitions"`
	TableName                 string                `json:"TableName"`
	KeySchema                 []keySchemaElement    `json:"KeySchema"`
	TableStatus               string                `json:"TableStatus"`
	CreationDateTime          float64               `json:"CreationDateTime"`
	ProvisionedThroughput     throughputDesc        `json:"ProvisionedThroughput"`
	TableSizeBytes            int64                 `json:"TableSizeBytes"`
	ItemCount                 int64                 `json:"ItemCount"`
	TableArn                  string                `json:"TableArn"`
	TableId                   string                `json:"TableId"`
	BillingModeSummary        *billingSummary       `json:"BillingModeSummary,omitempty"`
	LocalSecondaryIndexes     []indexDesc           `json:"LocalSecondaryIndexes,omitempty"`
	GlobalSecondaryIndexes    []indexDesc           `json:"GlobalSecondaryIndexes,omitempty"`
	StreamSpecification       *streamSpec           `json:"StreamSpecification,omitempty"`
	LatestStreamLabel         string                `json:"LatestStreamLabel,omitempty"`
	LatestStreamArn           string                `json:"LatestStreamArn,omitempty"`
	DeletionProtectionEnabled bool                  `json:"DeletionProtectionEnabled"`
	TableClassSummary         map[string]string     `json:"TableClassSummary,omitempty"`
	GlobalTableVersion        string                `json:"GlobalTableVersion,omitempty"`
	Replicas                  []replicaDescription  `json:"Replicas,omitempty"`
	MultiRegionConsistency    string                `json:"MultiRegionConsistency,omitempty"`
}

func epochSeconds(t time.Time) float64 {
	return float64(t.UnixMilli()) / 1000
}

// ---- validation helpers ----

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// checkTableRef is checkTableName for a reference to an existing table,
// which DynamoDB also takes as the table's ARN (apimodel.Check holds an ARN to
// its length; lookup resolves it).
func checkTableRef(name, field string) error {
	if strings.HasPrefix(name, "arn:") {
		return nil
	}
	return checkTableName(name, field)
}

func checkTableName(name, field string) error {
	if name == "" {
		return nullErr(field)
	}
	if len(name) < 3 {
		return awserr.Validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length greater than or equal to 3", name, field)
	}
	if len(name) > 255 {
		return awserr.Validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to 255", name, field)
	}
	if !namePattern.MatchString(name) {
		return awserr.Validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+", name, field)
	}
	return nil
}

// parseKeySchema validates a key schema; what names the schema in messages
// ("" for the table, else "index: NAME").
func parseKeySchema(ks []keySchemaElement, defs map[string]attr.Type, field string) (keyDef, error) {
	var k keyDef
	if ks == nil {
		return k, nullErr(field)
	}
	if len(ks) == 0 || len(ks) > 2 {
		return k, awserr.Validation("1 validation error detected: Value '%v' at '%s' failed to satisfy constraint: Member must have length less than or equal to 2 and greater than or equal to 1", ks, field)
	}
	for _, e := range ks {
		if e.AttributeName == "" {
			return k, awserr.Validation("1 validation error detected: Value null at '%s.member.attributeName' failed to satisfy constraint: Member must not be null", field)
		}
		if len(e.AttributeName) > 255 {
			return k, awserr.Validation("1 validation error detected: Value '%s' at '%s.member.attributeName' failed to satisfy constraint: Member must have length less than or equal to 255", e.AttributeName, field)
		}
		if e.KeyType != "HASH" && e.KeyType != "RANGE" {
			return k, awserr.Validation("1 validation error detected: Value '%s' at '%s.member.keyType' failed to satisfy constraint: Member must satisfy enum value set: [HASH, RANGE]", e.KeyType, field)
		}
	}
	if ks[0].KeyType != "HASH" {
		return k, awserr.Validation("Invalid KeySchema: The first KeySchemaElement is not a HASH key type")
	}
	k.Hash = ks[0].AttributeName
	if len(ks) == 2 {
		if ks[1].KeyType != "RANGE" {
			return k, awserr.Validation("Invalid KeySchema: The second KeySchemaElement is not a RANGE key type")
		}
		if ks[1].AttributeName == k.Hash {
			return k, awserr.Validation("Both the Hash Key and the Range Key element in the KeySchema have the same name")
		}
		k.Range = ks[1].AttributeName
	}
	var missing []string
	if t, ok := defs[k.Hash]; ok {
		k.HashType = t
	} else {
		missing = append(missing, k.Hash)
	}
	if k.Range != "" {
		if t, ok := defs[k.Range]; ok {
			k.RangeType = t
		} else {
			missing = append(missing, k.Range)
		}
	}
	if len(missing) > 0 {
		names := make([]string, 0, len(defs))
		for n := range defs {
			names = append(names, n)
		}
		sort.Strings(names)
		return k, awserr.Validation("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [%s], AttributeDefinitions: [%s]", strings.Join(missing, ", "), strings.Join(names, ", "))
	}
	return k, nil
}

func (k keyDef) schema() []keySchemaElement {
	out := []keySchemaElement{{AttributeName: k.Hash, KeyType: "HASH"}}
	if k.Range != "" {
		out = append(out, keySchemaElement{AttributeName: k.Range, KeyType: "RANGE"})
	}
	return out
}

func checkThroughput(tp *throughput, what string) (int64, int64, error) {
	if tp == nil || tp.ReadCapacityUnits == nil || tp.WriteCapacityUnits == nil {
		return 0, 0, awserr.Validation("One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED%s", what)
	}
	if *tp.ReadCapacityUnits < 1 || *tp.WriteCapacityUnits < 1 {
		return 0, 0, awserr.Validation("One or more parameter values were invalid: Provisioned throughput ReadCapacityUnits and WriteCapacityUnits must be at least 1%s", what)
	}
	return *tp.ReadCapacityUnits, *tp.WriteCapacityUnits, nil
}

// buildIndex validates one index spec.
func buildIndex(spec indexSpec, global bool, t *table, provisioned bool, arnBase string, now time.Time) (*index, error) {
	kind := "GlobalSecondaryIndexes"
	if !global {
		kind = "LocalSecondaryIndexes"
	}
	if err := checkTableName(spec.IndexName, kind+".member.indexName"); err != nil {
		return nil, err
	}
	k, err := parseKeySchema(spec.KeySchema, t.attrDefs, kind+".member.keySchema")
	if err != nil {
		return nil, err
	}
	ix := &index{name: spec.IndexName, global: global, key: k, created: now, arn: arnBase + "/index/" + spec.IndexName}
	if !global {
		if t.key.Range == "" {
			return nil, awserr.Validation("One or more parameter values were invalid: Table KeySchema does not have a range key, which is required when specifying a LocalSecondaryIndex")
		}
		if k.Hash != t.key.Hash {
			return nil, awserr.Validation("One or more parameter values were invalid: Index KeySchema does not have the same leading hash key as table KeySchema for index: %s. index hash key: %s, table hash key: %s", spec.IndexName, k.Hash, t.key.Hash)
		}
		if k.Range == "" {
			return nil, awserr.Validation("One or more parameter values were invalid: Index KeySchema does not have a range key for index: %s", spec.IndexName)
		}
	}
	if spec.Projection == nil {
		return nil, nullErr(kind + ".member.projection")
	}
	switch spec.Projection.ProjectionType {
	case "ALL", "KEYS_ONLY":
		if len(spec.Projection.NonKeyAttributes) > 0 {
			return nil, awserr.Validation("One or more parameter values were invalid: ProjectionType is %s, but NonKeyAttributes is specified", spec.Projection.ProjectionType)
		}
	case "INCLUDE":
		if len(spec.Projection.NonKeyAttributes) == 0 {
			return nil, awserr.Validation("One or more parameter values were invalid: NonKeyAttributes must not be empty when ProjectionType is INCLUDE")
		}
		seen := map[string]bool{}
		for _, n := range spec.Projection.NonKeyAttributes {
			if n == "" || len(n) > 255 {
				return nil, awserr.Validation("One or more parameter values were invalid: NonKeyAttributes must be 1 to 255 characters long")
			}
			if seen[n] {
				return nil, awserr.Validation("One or more parameter values were invalid: Duplicate attribute name in NonKeyAttributes: %s", n)
			}
			seen[n] = true
		}
		ix.nonKey = append([]string(nil), spec.Projection.NonKeyAttributes...)
	case "":
		return nil, awserr.Validation("One or more parameter values were invalid: Unknown ProjectionType: null")
	default:
		return nil, awserr.Validation("1 validation error detected: Value '%s' at '%s.member.projection.projectionType' failed to satisfy constraint: Member must satisfy enum value set: [ALL, INCLUDE, KEYS_ONLY]", spec.Projection.ProjectionType, kind)
	}
	ix.projType = spec.Projection.ProjectionType
	if global && provisioned {
		r, w, err := checkThroughput(spec.ProvisionedThroughput, " for index: "+spec.IndexName)
		if err != nil {
			return nil, err
		}
		ix.rcu, ix.wcu = r, w
	} else if global && spec.ProvisionedThroughput != nil {
		return nil, awserr.Validation("One or more parameter values were invalid: ProvisionedThroughput should not be specified for index: %s when BillingMode is PAY_PER_REQUEST", spec.IndexName)
	}
	ix.list = newSkiplist(uint64(now.UnixNano()) ^ uint64(len(spec.IndexName)))
	return ix, nil
}

// checkStreamSpec checks a StreamSpecification of CreateTable (creating)
// or UpdateTable, with DynamoDB's messages (which call the view type
// "UpdateViewType").
func checkStreamSpec(s *streamSpec, creating bool) (enabled bool, view string, err error) {
	if s == nil {
		return false, "", nil
	}
	if s.StreamEnabled == nil {
		return false, "", nullErr("streamSpecification.streamEnabled")
	}
	if !*s.StreamEnabled {
		if s.StreamViewType != "" && creating {
			return false, "", awserr.Validation("One or more parameter values were invalid: Table is being created with a stream disabled, UpdateViewType should not be specified")
		}
		if s.StreamViewType != "" {
			return false, "", awserr.Validation("One or more parameter values were invalid: If stream is being disabled, then UpdateViewType must not be specified")
		}
		return false, "", nil
	}
	switch s.StreamViewType {
	case stream.KeysOnly, stream.NewImage, stream.OldImage, stream.NewAndOldImages:
		return true, s.StreamViewType, nil
	case "":
		if creating {
			return false, "", awserr.Validation("One or more parameter values were invalid: You must specify a StreamViewType when enabling a stream")
		}
		return false, "", awserr.Validation("One or more parameter values were invalid: If stream is being enabled then UpdateViewType is required")
	default:
		return false, "", awserr.Validation("1 validation error detected: Value '%s' at 'streamSpecification.streamViewType' failed to satisfy constraint: Member must satisfy enum value set: [NEW_IMAGE, OLD_IMAGE, NEW_AND_OLD_IMAGES, KEYS_ONLY]", s.StreamViewType)
	}
}

// ---- operations ----

func (e *Engine) opCreateTable(ctx context.Context, body []byte) (any, error) {
	var req createTableRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkTableName(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	if req.AttributeDefinitions == nil {
		return nil, nullErr("attributeDefinitions")
	}
	now := e.clock.Now()
	region, _ := e.regionFor(ctx)
	t := &table{
		name:       req.TableName,
		region:     region,
		arn:        e.tableARN(region, req.TableName),
		created:    now,
		attrDefs:   map[string]attr.Type{},
		deletion:   req.DeletionProtectionEnabled,
		tableClass: req.TableClass,
		lagNanos:   int64(e.o.TTLLag),
		p:          e.p,
	}
	seed := e.seedSeq.Add(1)
	t.id = newTableID(now, seed)
	t.items = newSkiplist(uint64(now.UnixNano()) + seed)
	for _, d := range req.AttributeDefinitions {
		if d.AttributeName == "" {
			return nil, awserr.Validation("1 validation error detected: Value null at 'attributeDefinitions.member.attributeName' failed to satisfy constraint: Member must not be null")
		}
		var typ attr.Type
		switch d.AttributeType {
		case "S":
			typ = attr.S
		case "N":
			typ = attr.N
		case "B":
			typ = attr.B
		default:
			return nil, awserr.Validation("1 validation error detected: Value '%s' at 'attributeDefinitions.member.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]", d.AttributeType)
		}
		if _, dup := t.attrDefs[d.AttributeName]; dup {
			return nil, awserr.Validation("Cannot have two attributes with the same name: Invalid attribute name %s", d.AttributeName)
		}
		t.attrDefs[d.AttributeName] = typ
	}
	// DynamoDB's first key schema check: more key elements than
	// definitions (one attribute twice, or a key left undefined).
	if len(req.KeySchema) > len(req.AttributeDefinitions) {
		return nil, awserr.Validation("Invalid KeySchema: Some index key attribute have no definition")
	}
	k, err := parseKeySchema(req.KeySchema, t.attrDefs, "keySchema")
	if err != nil {
		return nil, err
	}
	t.key = k
	t.ktoks = t.keyToks()
	switch req.BillingMode {
	case "", "PROVISIONED":
		t.billing = "PROVISIONED"
		r, w, err := checkThroughput(req.ProvisionedThroughput, "")
		if err != nil {
			return nil, err
		}
		t.rcu, t.wcu = r, w
	case "PAY_PER_REQUEST":
		t.billing = "PAY_PER_REQUEST"
		if req.ProvisionedThroughput != nil {
			return nil, awserr.Validation("One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
	default:
		return nil, awserr.Validation("1 validation error detected: Value '%s' at 'billingMode' failed to satisfy constraint: Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]", req.BillingMode)
	}
	if len(req.GlobalSecondaryIndexes) > 20 {
		return nil, awserr.New(awserr.CodeLimitExceeded, "One or more parameter values were invalid: GlobalSecondaryIndex count exceeds the per-table limit of 20")
	}
	if len(req.LocalSecondaryIndexes) > 5 {
		return nil, awserr.Validation("One or more parameter values were invalid: Number of LocalSecondaryIndexes exceeds per-table limit of 5")
	}
	if req.GlobalSecondaryIndexes != nil && len(req.GlobalSecondaryIndexes) == 0 {
		return nil, awserr.Validation("One or more parameter values were invalid: List of GlobalSecondaryIndexes is empty")
	}
	if req.LocalSecondaryIndexes != nil && len(req.LocalSecondaryIndexes) == 0 {
		return nil, awserr.Validation("One or more parameter values were invalid: List of LocalSecondaryIndexes is empty")
	}
	used := map[string]bool{k.Hash: true, k.Range: true}
	names := map[string]bool{}
	for _, spec := range req.LocalSecondaryIndexes {
		ix, err := buildIndex(spec, false, t, false, t.arn, now)
		if err != nil {
			return nil, err
		}
		if names[ix.name] {
			return nil, awserr.Validation("One or more parameter values were invalid: Duplicate index name: %s", ix.name)
		}
		names[ix.name] = true
		used[ix.key.Hash], used[ix.key.Range] = true, true
		t.lsis = append(t.lsis, ix)
	}
	for _, spec := range req.GlobalSecondaryIndexes {
		ix, err := buildIndex(spec, true, t, t.billing == "PROVISIONED", t.arn, now)
		if err != nil {
			return nil, err
		}
		if names[ix.name] {
			return nil, awserr.Validation("One or more parameter values were invalid: Duplicate index name: %s", ix.name)
		}
		names[ix.name] = true
		used[ix.key.Hash], used[ix.key.Range] = true, true
		t.gsis = append(t.gsis, ix)
	}
	delete(used, "")
	if len(used) != len(t.attrDefs) {
		return nil, awserr.Validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	}
	enabled, view, err := checkStreamSpec(req.StreamSpecification, true)
	if err != nil {
		return nil, err
	}
	if t.tags, err = createTags(req.Tags); err != nil {
		return nil, err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tables[t.tkey()] != nil {
		return nil, awserr.InUse("Table already exists: %s", t.name)
	}
	if enabled {
		t.setStream(e.streams.Create(t.region, t.name, view))
	}
	e.tables[t.tkey()] = t
	if t.p != nil {
		t.p.tableChanged(t)
	}
	d := t.describe()
	d.TableStatus = "ACTIVE"
	return map[string]any{"TableDescription": d}, nil
}

// newTableID makes a table's TableId from the clock and a counter.
func newTableID(now time.Time, seed uint64) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(now.UnixNano()), uint16(seed), uint16(seed>>16)&0xfff, uint16(now.Nanosecond())&0xfff, uint64(now.UnixNano())&0xffffffffffff)
}

func (t *table) setStream(s *stream.Stream) {
	s.SetKeySchema(t.key.Hash, t.key.Range)
	t.stream = s
	t.latest = s
}

// describe renders the table. t.mu must not be held by the caller.
func (t *table) describe() tableDescription {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.describeLocked()
}

func (t *table) describeLocked() tableDescription {
	d := tableDescription{
		TableName:                 t.name,
		KeySchema:                 t.key.schema(),
		TableStatus:               "ACTIVE",
		CreationDateTime:          epochSeconds(t.created),
		ProvisionedThroughput:     throughputDesc{ReadCapacityUnits: t.rcu, WriteCapacityUnits: t.wcu},
		TableSizeBytes:            t.size,
		ItemCount:                 int64(t.items.Len()),
		TableArn:                  t.arn,
		TableId:                   t.id,
		DeletionProtectionEnabled: t.deletion,
	}
	names := make([]string, 0, len(t.attrDefs))
	for n := range t.attrDefs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d.AttributeDefinitions = append(d.AttributeDefinitions, attributeDefinition{AttributeName: n, AttributeType: t.attrDefs[n].String()})
	}
	if t.billing == "PAY_PER_REQUEST" {
		d.BillingModeSummary = &billingSummary{BillingMode: t.billing, LastUpdateToPayPerRequestDateTime: epochSeconds(t.created)}
	}
	if t.tableClass != "" {
		d.TableClassSummary = map[string]string{"TableClass": t.tableClass}
	}
	for _, ix := range t.lsis {
		d.LocalSecondaryIndexes = append(d.LocalSecondaryIndexes, ix.describe())
	}
	for _, ix := range t.gsis {
		id := ix.describe()
		id.IndexStatus = "ACTIVE"
		id.ProvisionedThroughput = &throughputDesc{ReadCapacityUnits: ix.rcu, WriteCapacityUnits: ix.wcu}
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, id)
	}
	if t.stream != nil {
		on := true
		d.StreamSpecification = &streamSpec{StreamEnabled: &on, StreamViewType: t.stream.ViewType()}
	}
	if t.latest != nil {
		d.LatestStreamArn = t.latest.ARN()
		d.LatestStreamLabel = t.latest.Label()
	}
	if t.repl != nil {
		t.describeReplicas(&d)
	}
	return d
}

func (ix *index) describe() indexDesc {
	d := indexDesc{
		IndexName:      ix.name,
		KeySchema:      ix.key.schema(),
		Projection:     projectionSpec{ProjectionType: ix.projType, NonKeyAttributes: ix.nonKey},
		IndexSizeBytes: ix.size,
		ItemCount:      int64(ix.list.Len()),
		IndexArn:       ix.arn,
	}
	return d
}

type tableNameRequest struct {
	TableName string `json:"TableName"`
}

// itemTable is lookup for the item operations (GetItem, PutItem,
// UpdateItem, DeleteItem, Query, Scan, the batches and the transactions),
// whose ResourceNotFoundException DynamoDB words without the table's
// name: "Requested resource not found". The table operations keep
// lookup's "Requested resource not found: Table: NAME not found".
func (e *Engine) itemTable(ctx context.Context, name string) (*table, error) {
	t, err := e.lookup(ctx, name)
	if err != nil {
		return nil, awserr.NotFound("Requested resource not found")
	}
	return t, nil
}

// namedTable decodes a request that names only a table (DescribeTable,
// DescribeTimeToLive) and returns that table.
func (e *Engine) namedTable(ctx context.Context, body []byte) (*table, error) {
	var req tableNameRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkTableRef(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	return e.lookup(ctx, req.TableName)
}

func (e *Engine) opDescribeTable(ctx context.Context, body []byte) (any, error) {
	t, err := e.namedTable(ctx, body)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Table": t.describe()}, nil
}

func (e *Engine) opListTables(ctx context.Context, body []byte) (any, error) {
	var req struct {
		ExclusiveStartTableName string `json:"ExclusiveStartTableName"`
		Limit                   *int   `json:"Limit"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	limit := 100
	if req.Limit != nil { // held to 1..100 by apimodel.Check
		limit = *req.Limit
	}
	if req.ExclusiveStartTableName != "" {
		if err := checkTableName(req.ExclusiveStartTableName, "exclusiveStartTableName"); err != nil {
			return nil, err
		}
	}
	region, _ := e.regionFor(ctx)
	e.mu.RLock()
	names := make([]string, 0, len(e.tables))
	for k := range e.tables {
		if k.region == region && k.name > req.ExclusiveStartTableName {
			names = append(names, k.name)
		}
	}
	e.mu.RUnlock()
	sort.Strings(names)
	resp := map[string]any{}
	if len(names) > limit {
		names = names[:limit]
		resp["LastEvaluatedTableName"] = names[limit-1]
	}
	resp["TableNames"] = names
	return resp, nil
}

func (e *Engine) opDeleteTable(ctx context.Context, body []byte) (any, error) {
	var req tableNameRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkTableRef(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	region, fixed := e.regionFor(ctx)
	e.mu.Lock()
	t := e.tableLocked(region, fixed, req.TableName)
	if t == nil {
		e.mu.Unlock()
		return nil, awserr.NotFound("Requested resource not found: Table: %s not found", req.TableName)
	}
	t.mu.Lock()
	if t.deletion {
		t.mu.Unlock()
		e.mu.Unlock()
		return nil, awserr.Validation("Resource cannot be deleted as it is currently protected against deletion. Disable deletion protection first.")
	}
	d := t.describeLocked()
	e.dropTableLocked(t)
	t.mu.Unlock()
	e.mu.Unlock()
	d.TableStatus = "DELETING"
	return map[string]any{"TableDescription": d}, nil
}

// dropTableLocked deletes t: from the engine, its stream disabled, and
// out of its global table when it is a replica (as DynamoDB deletes a
// replica: the others stop replicating to it). e.mu and t.mu are held for
// writing.
func (e *Engine) dropTableLocked(t *table) {
	delete(e.tables, t.tkey())
	if t.p != nil {
		t.p.tableDeleted(t)
	}
	if t.stream != nil {
		e.streams.Disable(t.stream.ARN())
		t.stream = nil
	}
	if t.repl != nil {
		e.leaveGroupLocked(t)
	}
}

type gsiUpdate struct {
	Create *indexSpec `json:"Create"`
	Update *struct {
		IndexName             string      `json:"IndexName"`
		ProvisionedThroughput *throughput `json:"ProvisionedThroughput"`
	} `json:"Update"`
	Delete *struct {
		IndexName string `json:"IndexName"`
	} `json:"Delete"`
}

type updateTableRequest struct {
	TableName                   string                `json:"TableName"`
	AttributeDefinitions        []attributeDefinition `json:"AttributeDefinitions"`
	BillingMode                 string                `json:"BillingMode"`
	ProvisionedThroughput       *throughput           `json:"ProvisionedThroughput"`
	GlobalSecondaryIndexUpdates []gsiUpdate           `json:"GlobalSecondaryIndexUpdates"`
	StreamSpecification         *streamSpec           `json:"StreamSpecification"`
	DeletionProtectionEnabled   *bool                 `json:"DeletionProtectionEnabled"`
	TableClass                  string                `json:"TableClass"`
	ReplicaUpdates              []replicaUpdate       `json:"ReplicaUpdates"`
	MultiRegionConsistency      string                `json:"MultiRegionConsistency"`
}

// settings reports whether the request changes anything but replicas.
func (req *updateTableRequest) settings() bool {
	return req.BillingMode != "" || req.ProvisionedThroughput != nil || req.GlobalSecondaryIndexUpdates != nil ||
		req.StreamSpecification != nil || req.DeletionProtectionEnabled != nil || req.TableClass != ""
}

func (e *Engine) opUpdateTable(ctx context.Context, body []byte) (any, error) {
	var req updateTableRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	// apimodel.Check has checked TableName, BillingMode's values and the
	// StreamSpecification's members.
	t, err := e.lookup(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	if req.ReplicaUpdates != nil || req.MultiRegionConsistency != "" {
		if req.settings() {
			// The engine's rule; DynamoDB's own wording is not known.
			return nil, awserr.Validation("One or more parameter values were invalid: ReplicaUpdates cannot be combined with other table updates in one UpdateTable request")
		}
		return e.updateReplicas(t, &req)
	}
	if !req.settings() {
		return nil, awserr.Validation("At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required")
	}
	if len(req.GlobalSecondaryIndexUpdates) > 1 {
		return nil, awserr.Validation("One or more parameter values were invalid: Only one global secondary index update per index is allowed simultaneously.")
	}
	if err := t.checkGlobalUpdate(&req); err != nil {
		return nil, err
	}
	resp, err := e.updateTableOn(t, &req)
	if err == nil {
		e.updateOtherReplicas(t, &req)
	}
	return resp, err
}

// updateTableOn applies an UpdateTable of settings to t: validated whole
// first (planUpdateLocked changes nothing), then applied.
func (e *Engine) updateTableOn(t *table, req *updateTableRequest) (any, error) {
	now := e.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	plan, err := t.planUpdateLocked(req, now)
	if err != nil {
		return nil, err
	}
	if t.p != nil {
		defer t.p.tableChanged(t) // under the lock, whatever the update changed
	}
	if err := e.applyUpdateLocked(t, req, plan); err != nil {
		return nil, err
	}
	return map[string]any{"TableDescription": t.describeLocked()}, nil
}

// tableUpdate is what a validated UpdateTable of settings changes.
type tableUpdate struct {
	billing      string
	rcu, wcu     int64
	enabled      bool   // with a StreamSpecification: enable (or disable) the stream
	view         string // the view of a stream enabled
	defs         map[string]attr.Type
	create       *index // a GSI to create (defs: the attribute definitions with its keys)
	drop         string // a GSI to delete
	tput         *index // a GSI whose provisioned throughput changes to ixRCU, ixWCU
	ixRCU, ixWCU int64
}

// planUpdateLocked validates an UpdateTable of settings against t and
// returns what it changes, changing nothing. t.mu is held.
func (t *table) planUpdateLocked(req *updateTableRequest, now time.Time) (*tableUpdate, error) {
	enabled, view, err := checkStreamSpec(req.StreamSpecification, false)
	if err != nil {
		return nil, err
	}
	u := &tableUpdate{billing: t.billing, rcu: t.rcu, wcu: t.wcu, enabled: enabled, view: view}
	if req.BillingMode != "" {
		u.billing = req.BillingMode
	}
	if u.billing == "PROVISIONED" {
		if req.ProvisionedThroughput != nil || t.billing != "PROVISIONED" {
			r, w, err := checkThroughput(req.ProvisionedThroughput, "")
			if err != nil {
				return nil, err
			}
			if t.billing == "PROVISIONED" && r == t.rcu && w == t.wcu {
				return nil, sameThroughput(t.rcu, t.wcu)
			}
			u.rcu, u.wcu = r, w
		}
	} else {
		if req.ProvisionedThroughput != nil {
			return nil, awserr.Validation("One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
		u.rcu, u.wcu = 0, 0
	}
	if req.StreamSpecification != nil {
		if enabled && t.stream != nil {
			return nil, awserr.Validation("Table already has an enabled stream: TableName: %s", t.name)
		}
		if !enabled && t.stream == nil {
			return nil, awserr.Validation("Table has no stream to disable: TableName: %s", t.name)
		}
	}
	for _, g := range req.GlobalSecondaryIndexUpdates {
		if err := t.planIndexUpdate(u, g, req.AttributeDefinitions, now); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// planIndexUpdate validates one GlobalSecondaryIndexUpdate into u. t.mu
// is held.
func (t *table) planIndexUpdate(u *tableUpdate, g gsiUpdate, attrDefs []attributeDefinition, now time.Time) error {
	n := 0
	for _, given := range []bool{g.Create != nil, g.Update != nil, g.Delete != nil} {
		if given {
			n++
		}
	}
	if n != 1 {
		return awserr.Validation("One or more parameter values were invalid: One of GlobalSecondaryIndexUpdate.Create, GlobalSecondaryIndexUpdate.Update or GlobalSecondaryIndexUpdate.Delete must be specified")
	}
	switch {
	case g.Create != nil:
		return t.planIndexCreate(u, g.Create, attrDefs, now)
	case g.Delete != nil:
		ix := t.indexByName(g.Delete.IndexName)
		if ix == nil || !ix.global {
			return awserr.NotFound("Requested resource not found: Index: %s not found", g.Delete.IndexName)
		}
		u.drop = ix.name
	default:
		ix := t.indexByName(g.Update.IndexName)
		if ix == nil || !ix.global {
			return awserr.NotFound("Requested resource not found: Index: %s not found", g.Update.IndexName)
		}
		if u.billing == "PROVISIONED" {
			r, w, err := checkThroughput(g.Update.ProvisionedThroughput, " for index: "+ix.name)
			if err != nil {
				return err
			}
			u.tput, u.ixRCU, u.ixWCU = ix, r, w
		}
	}
	return nil
}

// planIndexCreate validates a GSI to create, with the attribute
// definitions the request adds, into u. t.mu is held.
func (t *table) planIndexCreate(u *tableUpdate, spec *indexSpec, attrDefs []attributeDefinition, now time.Time) error {
	if len(t.gsis) >= 20 {
		return awserr.New(awserr.CodeLimitExceeded, "One or more parameter values were invalid: GlobalSecondaryIndex count exceeds the per-table limit of 20")
	}
	if t.indexByName(spec.IndexName) != nil {
		return awserr.Validation("One or more parameter values were invalid: Attempting to create an index which already exists")
	}
	defs := maps.Clone(t.attrDefs)
	for _, d := range attrDefs {
		ty, ok := attr.ParseType(d.AttributeType)
		if !ok || (ty != attr.S && ty != attr.N && ty != attr.B) {
			return awserr.Validation("1 validation error detected: Value '%s' at 'attributeDefinitions.member.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]", d.AttributeType)
		}
		if old, ok := defs[d.AttributeName]; ok && old != ty {
			return awserr.Validation("One or more parameter values were invalid: Cannot change the type of an existing attribute definition: %s", d.AttributeName)
		}
		defs[d.AttributeName] = ty
	}
	ix, err := buildIndex(*spec, true, &table{key: t.key, attrDefs: defs}, u.billing == "PROVISIONED", t.arn, now)
	if err != nil {
		return err
	}
	// Newly defined attributes must be used by the new index.
	for n := range defs {
		if _, old := t.attrDefs[n]; !old && n != ix.key.Hash && n != ix.key.Range {
			return awserr.Validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
		}
	}
	u.create, u.defs = ix, defs
	return nil
}

// applyUpdateLocked applies a validated update to t. t.mu is held for
// writing.
func (e *Engine) applyUpdateLocked(t *table, req *updateTableRequest, u *tableUpdate) error {
	t.billing, t.rcu, t.wcu = u.billing, u.rcu, u.wcu
	if u.tput != nil {
		u.tput.rcu, u.tput.wcu = u.ixRCU, u.ixWCU
	}
	if u.billing == "PAY_PER_REQUEST" {
		for _, ix := range t.gsis {
			ix.rcu, ix.wcu = 0, 0
		}
	}
	if req.DeletionProtectionEnabled != nil {
		t.deletion = *req.DeletionProtectionEnabled
	}
	if req.TableClass != "" {
		t.tableClass = req.TableClass
	}
	if req.StreamSpecification != nil {
		if u.enabled {
			t.setStream(e.streams.Create(t.region, t.name, u.view))
		} else {
			e.streams.Disable(t.stream.ARN())
			t.stream = nil
		}
	}
	if u.create != nil {
		t.attrDefs = u.defs
		if err := t.backfillLocked(u.create); err != nil {
			return err
		}
		t.gsis = append(t.gsis, u.create)
	}
	if u.drop != "" {
		for i, ix := range t.gsis {
			if ix.name == u.drop {
				t.gsis = append(t.gsis[:i:i], t.gsis[i+1:]...)
				break
			}
		}
		t.pruneAttrDefsLocked()
	}
	return nil
}

// sameThroughput is DynamoDB's refusal of a PROVISIONED table's
// throughput set to what it already is.
func sameThroughput(rcu, wcu int64) error {
	return awserr.Validation("The provisioned throughput for the table will not change. The requested value equals the current value. "+
		"Current ReadCapacityUnits provisioned for the table: %d. Requested ReadCapacityUnits: %d. "+
		"Current WriteCapacityUnits provisioned for the table: %d. Requested WriteCapacityUnits: %d. "+
		"Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits.", rcu, rcu, wcu, wcu)
}

// pruneAttrDefsLocked drops attribute definitions no key uses any more.
func (t *table) pruneAttrDefsLocked() {
	used := map[string]bool{t.key.Hash: true, t.key.Range: true}
	for _, ix := range t.gsis {
		used[ix.key.Hash], used[ix.key.Range] = true, true
	}
	for _, ix := range t.lsis {
		used[ix.key.Hash], used[ix.key.Range] = true, true
	}
	for n := range t.attrDefs {
		if !used[n] {
			delete(t.attrDefs, n)
		}
	}
}

// backfillLocked fills a new index from the table's items.
func (t *table) backfillLocked(ix *index) error {
	for n := t.items.First(); n != nil; n = n.Next() {
		it, err := decodeStored(n.val)
		if err != nil {
			return err
		}
		ix.add(t, n.val, it)
	}
	return nil
}

// ---- TTL configuration ----

func (e *Engine) opDescribeTimeToLive(ctx context.Context, body []byte) (any, error) {
	t, err := e.namedTable(ctx, body)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	d := map[string]any{"TimeToLiveStatus": "DISABLED"}
	if t.ttlAttr != "" {
		d = map[string]any{"TimeToLiveStatus": "ENABLED", "AttributeName": t.ttlAttr}
	}
	return map[string]any{"TimeToLiveDescription": d}, nil
}

func (e *Engine) opUpdateTimeToLive(ctx context.Context, body []byte) (any, error) {
	var req struct {
		TableName               string `json:"TableName"`
		TimeToLiveSpecification *struct {
			Enabled       *bool  `json:"Enabled"`
			AttributeName string `json:"AttributeName"`
		} `json:"TimeToLiveSpecification"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkTableRef(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	spec := req.TimeToLiveSpecification
	if spec == nil {
		return nil, nullErr("timeToLiveSpecification")
	}
	if spec.Enabled == nil {
		return nil, nullErr("timeToLiveSpecification.enabled")
	}
	if spec.AttributeName == "" {
		return nil, nullErr("timeToLiveSpecification.attributeName")
	}
	if len(spec.AttributeName) > 255 {
		return nil, awserr.Validation("1 validation error detected: Value '%s' at 'timeToLiveSpecification.attributeName' failed to satisfy constraint: Member must have length less than or equal to 255", spec.AttributeName)
	}
	t, err := e.lookup(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	if err := e.setTTL(ctx, t, *spec.Enabled, spec.AttributeName, true); err != nil {
		return nil, err
	}
	e.ttlOtherReplicas(ctx, t, *spec.Enabled, spec.AttributeName)
	return map[string]any{"TimeToLiveSpecification": map[string]any{"Enabled": *spec.Enabled, "AttributeName": spec.AttributeName}}, nil
}

// setTTL enables TTL on attribute name of t, or disables it; strong
// refuses enabling it on a global table with multi-Region strong
// consistency.
func (e *Engine) setTTL(ctx context.Context, t *table, enabled bool, name string, strong bool) error {
	t.mu.Lock()
	if strong && enabled && t.repl != nil {
		if _, s := t.repl.g.snapshot(); s { // the engine's wording
			t.mu.Unlock()
			return awserr.Validation("One or more parameter values were invalid: Time to Live is not supported on global tables with multi-Region strong consistency (MultiRegionConsistency STRONG): table %s", t.name)
		}
	}
	if enabled {
		if t.ttlAttr != "" {
			t.mu.Unlock()
			return awserr.Validation("TimeToLive is already enabled")
		}
		t.ttlAttr = name
	} else {
		if t.ttlAttr == "" {
			t.mu.Unlock()
			return awserr.Validation("TimeToLive is already disabled")
		}
		if t.ttlAttr != name {
			cur := t.ttlAttr
			t.mu.Unlock()
			return awserr.Validation("TimeToLive is active on a different AttributeName: current AttributeName is %s", cur)
		}
		t.ttlAttr = ""
	}
	if t.p != nil {
		t.p.tableChanged(t)
	}
	t.mu.Unlock()
	// Recompute every item's expiry in chunks so that a big table keeps
	// serving requests meanwhile. Writes that happen during the pass already
	// use the new attribute. The pass finishes even if the client goes
	// away: the attribute is already changed, and items left with
	// expiries of the old one would expire wrongly, or never.
	return t.recomputeExpiry(context.WithoutCancel(ctx))
}

// recomputeExpiry refreshes entry.exp for the current TTL attribute.
func (t *table) recomputeExpiry(ctx context.Context) error {
	var cursor []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t.mu.Lock()
		n := t.items.First()
		if cursor != nil {
			n = t.items.SeekGE(cursor)
		}
		for i := 0; n != nil && i < sweepChunk; i, n = i+1, n.Next() {
			if t.ttlAttr == "" {
				n.val.exp = noExpiry
				continue
			}
			it, err := decodeStored(n.val)
			if err != nil {
				t.mu.Unlock()
				return err
			}
			n.val.exp = expiryOf(it, t.ttlAttr)
		}
		if n == nil {
			t.mu.Unlock()
			return nil
		}
		cursor = n.key
		t.mu.Unlock()
	}
}
