package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/apimodel"
	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// Tables: CreateTable, DescribeTable, ListTables and DeleteTable, their
// wire types and the checks of a table's name, key schema, throughput,
// indexes and stream specification that CreateTable and UpdateTable share.

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
	if !apimodel.ValidName(name) {
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

func (e *Engine) opCreateTable(ctx context.Context, body []byte) (any, error) {
	var req createTableRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	t, err := e.newTable(ctx, &req)
	if err != nil {
		return nil, err
	}
	enabled, view, err := checkStreamSpec(req.StreamSpecification, true)
	if err != nil {
		return nil, err
	}
	if t.tags, err = createTags(req.Tags); err != nil {
		return nil, err
	}
	return e.addTable(t, enabled, view)
}

// newTable checks a CreateTable request and returns the table it
// describes, in the request's Region, not yet known to the engine.
func (e *Engine) newTable(ctx context.Context, req *createTableRequest) (*table, error) {
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
	t.items = newItemList(uint64(now.UnixNano()) + seed)
	if err := t.defineAttrs(req.AttributeDefinitions); err != nil {
		return nil, err
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
	if err := t.setBilling(req.BillingMode, req.ProvisionedThroughput); err != nil {
		return nil, err
	}
	if err := t.createIndexes(req, now); err != nil {
		return nil, err
	}
	return t, nil
}

// defineAttrs sets the table's attribute definitions, refusing an unnamed
// or twice-named attribute and a type other than S, N and B.
func (t *table) defineAttrs(defs []attributeDefinition) error {
	for _, d := range defs {
		if d.AttributeName == "" {
			return awserr.Validation("1 validation error detected: Value null at 'attributeDefinitions.member.attributeName' failed to satisfy constraint: Member must not be null")
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
			return awserr.Validation("1 validation error detected: Value '%s' at 'attributeDefinitions.member.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]", d.AttributeType)
		}
		if _, dup := t.attrDefs[d.AttributeName]; dup {
			return awserr.Validation("Cannot have two attributes with the same name: Invalid attribute name %s", d.AttributeName)
		}
		t.attrDefs[d.AttributeName] = typ
	}
	return nil
}

// setBilling sets a new table's billing mode and provisioned throughput.
func (t *table) setBilling(mode string, tp *throughput) error {
	switch mode {
	case "", "PROVISIONED":
		t.billing = "PROVISIONED"
		r, w, err := checkThroughput(tp, "")
		if err != nil {
			return err
		}
		t.rcu, t.wcu = r, w
	case "PAY_PER_REQUEST":
		t.billing = "PAY_PER_REQUEST"
		if tp != nil {
			return awserr.Validation("One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
	default:
		return awserr.Validation("1 validation error detected: Value '%s' at 'billingMode' failed to satisfy constraint: Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]", mode)
	}
	return nil
}

// createIndexes builds a new table's local and global secondary indexes,
// refusing too many, an empty list, a name used twice, and attribute
// definitions that no key of the table or its indexes uses.
func (t *table) createIndexes(req *createTableRequest, now time.Time) error {
	if len(req.GlobalSecondaryIndexes) > 20 {
		return awserr.New(awserr.CodeLimitExceeded, "One or more parameter values were invalid: GlobalSecondaryIndex count exceeds the per-table limit of 20")
	}
	if len(req.LocalSecondaryIndexes) > 5 {
		return awserr.Validation("One or more parameter values were invalid: Number of LocalSecondaryIndexes exceeds per-table limit of 5")
	}
	if req.GlobalSecondaryIndexes != nil && len(req.GlobalSecondaryIndexes) == 0 {
		return awserr.Validation("One or more parameter values were invalid: List of GlobalSecondaryIndexes is empty")
	}
	if req.LocalSecondaryIndexes != nil && len(req.LocalSecondaryIndexes) == 0 {
		return awserr.Validation("One or more parameter values were invalid: List of LocalSecondaryIndexes is empty")
	}
	used := map[string]bool{t.key.Hash: true, t.key.Range: true}
	names := map[string]bool{}
	for _, kind := range []struct {
		specs  []indexSpec
		global bool
		into   *[]*index
	}{{req.LocalSecondaryIndexes, false, &t.lsis}, {req.GlobalSecondaryIndexes, true, &t.gsis}} {
		for _, spec := range kind.specs {
			ix, err := buildIndex(spec, kind.global, t, kind.global && t.billing == "PROVISIONED", t.arn, now)
			if err != nil {
				return err
			}
			if names[ix.name] {
				return awserr.Validation("One or more parameter values were invalid: Duplicate index name: %s", ix.name)
			}
			names[ix.name] = true
			used[ix.key.Hash], used[ix.key.Range] = true, true
			*kind.into = append(*kind.into, ix)
		}
	}
	delete(used, "")
	if len(used) != len(t.attrDefs) {
		return awserr.Validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	}
	return nil
}

// addTable makes a new table known to the engine, with a stream of the
// given view when enabled, and logs it; a table of its name in its Region
// is ResourceInUseException.
func (e *Engine) addTable(t *table, enabled bool, view string) (any, error) {
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
