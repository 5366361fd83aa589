package engine

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Tags: TagResource, UntagResource and ListTagsOfResource on table ARNs,
// plus CreateTable's Tags. The checks and their messages are DynamoDB's:
//
//   - ResourceArn must be a table ARN, arn:aws:dynamodb:REGION:ACCOUNT:table/NAME
//     (an index or stream ARN is not one): "Invalid TableArn: Invalid
//     ResourceArn provided as input ARN"; a missing one is "Invalid TableArn".
//     A well-formed ARN of another account is an AccessDeniedException, as
//     for a caller without rights there ("User: arn:aws:iam::ACCOUNT:root
//     is not authorized to perform: dynamodb:ListTagsOfResource on
//     resource: ARN"); one of the engine's account naming a table the
//     engine does not hold is a ResourceNotFoundException ("ResourcArn" is
//     DynamoDB's spelling).
//   - A key is 1-128 characters, a value 0-256 (Unicode characters, not
//     bytes), both letters, digits, white space and + - = . _ : / @ only.
//   - A key may not start with "aws:" in any case ("AWS:", "Aws:"), in
//     TagResource, CreateTable and UntagResource alike: "Tag Key cannot be
//     prefixed with aws:, Key: KEY". DynamoDB's guide names only "aws:" and
//     calls keys case-sensitive, but AWS's tagging rule reserves the prefix
//     in any case and the service refuses "AWS:foo" ("myaws:foo" is fine).
//   - One request may not name a key twice.
//   - A table holds at most 50 tags, counted after the request is merged:
//     overwriting existing keys at 50 is fine, a new key is not. The limit is
//     a ValidationException, as in DynamoDB, not a LimitExceededException.
//   - ListTagsOfResource returns every tag in one page: with at most 50 tags
//     DynamoDB never returns a NextToken, and a NextToken given is ignored.
//   - No byte limit on a tag set is documented, so none is applied beyond
//     what the counts and lengths above imply (at most 50 x 384 characters).
//
// Tags live on the table, so they go with it when the table is deleted; a
// table created again under the same name starts with only its own tags.

const maxTags = 50

// The tag operations add themselves to the operation table.
func init() {
	ops["TagResource"] = (*Engine).opTagResource
	ops["UntagResource"] = (*Engine).opUntagResource
	ops["ListTagsOfResource"] = (*Engine).opListTagsOfResource
}

// tag is one tag, in the order it was first set.
type tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// tagIn is a tag as a request carries it; nil members were absent.
type tagIn struct {
	Key   *string `json:"Key"`
	Value *string `json:"Value"`
}

// tagList is a table's tags, each key once, in the order keys were first
// set. The table's mu guards it.
type tagList []tag

func (l tagList) index(key string) int {
	for i, t := range l {
		if t.Key == key {
			return i
		}
	}
	return -1
}

// merged returns l with in applied: a key already there takes the new value
// in place, a new key is appended. l is not modified.
func (l tagList) merged(in []tag) tagList {
	out := make(tagList, len(l), len(l)+len(in))
	copy(out, l)
	for _, t := range in {
		if i := out.index(t.Key); i >= 0 {
			out[i].Value = t.Value
		} else {
			out = append(out, t)
		}
	}
	return out
}

// without returns l less the given keys (absent keys are fine).
func (l tagList) without(keys []string) tagList {
	drop := make(map[string]bool, len(keys))
	for _, k := range keys {
		drop[k] = true
	}
	out := make(tagList, 0, len(l))
	for _, t := range l {
		if !drop[t.Key] {
			out = append(out, t)
		}
	}
	return out
}

func tooManyTags() error {
	return awserr.Validation("Number of Tags exceed the current limit for the provided ResourceArn")
}

// tagChars reports whether s holds only the characters DynamoDB allows in
// tags: letters and digits of any script, white space and + - = . _ : / @.
func tagChars(s string) bool {
	for _, r := range s {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsSpace(r):
		case strings.ContainsRune("+-=._:/@", r):
		default:
			return false
		}
	}
	return true
}

func badTagKey(k *string) error {
	if k == nil {
		return awserr.Validation("The Tag Key provided is invalid, Key: null")
	}
	return awserr.Validation("The Tag Key provided is invalid, Key: %s", *k)
}

// checkTagKey checks one key as TagResource, UntagResource and CreateTable
// take it: its length and characters, and not the prefix AWS reserves for
// its own tags, "aws:" in any case.
func checkTagKey(k *string) error {
	if k == nil {
		return badTagKey(k)
	}
	if n := utf8.RuneCountInString(*k); n < 1 || n > 128 || !utf8.ValidString(*k) || !tagChars(*k) {
		return badTagKey(k)
	}
	if len(*k) >= 4 && strings.ToLower((*k)[:4]) == "aws:" {
		return awserr.Validation("Tag Key cannot be prefixed with aws:, Key: %s", *k)
	}
	return nil
}

// checkTags validates the tags of one request (TagResource or CreateTable)
// and returns them; at most 50 distinct keys may be given.
func checkTags(in []tagIn) ([]tag, error) {
	out := make([]tag, 0, len(in))
	seen := make(map[string]bool, len(in))
	for _, t := range in {
		if err := checkTagKey(t.Key); err != nil {
			return nil, err
		}
		if t.Value == nil {
			return nil, awserr.Validation("The Tag Value provided is invalid, Value: null")
		}
		if utf8.RuneCountInString(*t.Value) > 256 || !utf8.ValidString(*t.Value) || !tagChars(*t.Value) {
			return nil, awserr.Validation("The Tag Value provided is invalid, Value: %s", *t.Value)
		}
		if seen[*t.Key] {
			return nil, awserr.Validation("Duplicate Tag Keys provided as input: Duplicate Tag Key found %s", *t.Key)
		}
		seen[*t.Key] = true
		out = append(out, tag{Key: *t.Key, Value: *t.Value})
	}
	if len(out) > maxTags {
		return nil, tooManyTags()
	}
	return out, nil
}

// createTags validates CreateTable's Tags (an empty list is allowed there)
// and returns the new table's tag list.
func createTags(in []tagIn) (tagList, error) {
	tags, err := checkTags(in)
	if err != nil {
		return nil, err
	}
	return tagList(nil).merged(tags), nil
}

// checkTableARN checks that arn has the shape of a table ARN and returns
// the table name in it; a nil arn is a missing ResourceArn.
func checkTableARN(arn *string) (name string, err error) {
	if arn == nil {
		return "", awserr.Validation("Invalid TableArn")
	}
	invalid := awserr.Validation("Invalid TableArn: Invalid ResourceArn provided as input %s", *arn)
	parts := strings.SplitN(*arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] != "aws" || parts[2] != "dynamodb" || parts[3] == "" || parts[4] == "" {
		return "", invalid
	}
	for _, r := range parts[4] {
		if r < '0' || r > '9' {
			return "", invalid
		}
	}
	name, ok := strings.CutPrefix(parts[5], "table/")
	if !ok || len(name) < 3 || strings.Contains(name, "/") {
		return "", invalid
	}
	return name, nil
}

// checkAccount denies a tag operation (action, e.g. "TagResource") on a
// table ARN, already checked by checkTableARN, of an account other than
// the engine's.
func (e *Engine) checkAccount(action, arn string) error {
	if strings.SplitN(arn, ":", 6)[4] == e.o.AccountID {
		return nil
	}
	return awserr.Newf("AccessDeniedException", "User: arn:aws:iam::%s:root is not authorized to perform: dynamodb:%s on resource: %s",
		e.o.AccountID, action, arn)
}

// taggedTable returns the table whose ARN is arn, with e.mu read-locked
// (the caller unlocks it), so the table cannot be deleted meanwhile.
func (e *Engine) taggedTable(ctx context.Context, arn, name string) (*table, error) {
	region, fixed := e.regionFor(ctx)
	e.mu.RLock()
	t := e.tableLocked(region, fixed, arn)
	if t == nil || t.arn != arn {
		e.mu.RUnlock()
		return nil, awserr.NotFound("Requested resource not found: ResourcArn: %s not found", arn)
	}
	return t, nil
}

func (e *Engine) opTagResource(ctx context.Context, body []byte) (any, error) {
	var req struct {
		ResourceArn *string `json:"ResourceArn"`
		Tags        []tagIn `json:"Tags"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.ResourceArn == nil {
		return nil, awserr.Validation("Invalid TableArn")
	}
	if req.Tags == nil {
		return nil, nullErr("tags")
	}
	name, err := checkTableARN(req.ResourceArn)
	if err != nil {
		return nil, err
	}
	if err := e.checkAccount("TagResource", *req.ResourceArn); err != nil {
		return nil, err
	}
	if len(req.Tags) == 0 {
		return nil, awserr.Validation("Atleast one Tag needs to be provided as Input.")
	}
	tags, err := checkTags(req.Tags)
	if err != nil {
		return nil, err
	}
	t, err := e.taggedTable(ctx, *req.ResourceArn, name)
	if err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	next := t.tags.merged(tags)
	if len(next) > maxTags {
		return nil, tooManyTags()
	}
	t.tags = next
	if t.p != nil {
		t.p.tableChanged(t)
	}
	return struct{}{}, nil
}

func (e *Engine) opUntagResource(ctx context.Context, body []byte) (any, error) {
	var req struct {
		ResourceArn *string   `json:"ResourceArn"`
		TagKeys     []*string `json:"TagKeys"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.ResourceArn == nil {
		return nil, awserr.Validation("Invalid TableArn")
	}
	if req.TagKeys == nil {
		return nil, nullErr("tagKeys")
	}
	name, err := checkTableARN(req.ResourceArn)
	if err != nil {
		return nil, err
	}
	if err := e.checkAccount("UntagResource", *req.ResourceArn); err != nil {
		return nil, err
	}
	if len(req.TagKeys) == 0 {
		return nil, awserr.Validation("Atleast one Tag Key needs to be provided as Input.")
	}
	keys := make([]string, 0, len(req.TagKeys))
	for _, k := range req.TagKeys {
		if err := checkTagKey(k); err != nil {
			return nil, err
		}
		keys = append(keys, *k)
	}
	if len(keys) > maxTags {
		return nil, tooManyTags()
	}
	t, err := e.taggedTable(ctx, *req.ResourceArn, name)
	if err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	t.mu.Lock()
	t.tags = t.tags.without(keys)
	if t.p != nil {
		t.p.tableChanged(t)
	}
	t.mu.Unlock()
	return struct{}{}, nil
}

func (e *Engine) opListTagsOfResource(ctx context.Context, body []byte) (any, error) {
	var req struct {
		ResourceArn *string `json:"ResourceArn"`
		NextToken   *string `json:"NextToken"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	name, err := checkTableARN(req.ResourceArn)
	if err != nil {
		return nil, err
	}
	if err := e.checkAccount("ListTagsOfResource", *req.ResourceArn); err != nil {
		return nil, err
	}
	t, err := e.taggedTable(ctx, *req.ResourceArn, name)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	tags := make([]tag, len(t.tags))
	copy(tags, t.tags)
	t.mu.RUnlock()
	e.mu.RUnlock()
	return map[string]any{"Tags": tags}, nil
}
