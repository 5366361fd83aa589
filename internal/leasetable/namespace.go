package leasetable

import (
	"context"
	"fmt"
	"maps"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// namespaceRE is what a namespace may be: a short name of letters,
// digits, '_' and '-' (never '#', ':' or '/', so that no namespaced key
// equals another namespace's or an unnamespaced one).
var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// CheckNamespace checks a namespace (see Config.Namespace); "" is valid.
func CheckNamespace(ns string) error {
	if ns == "" || namespaceRE.MatchString(ns) {
		return nil
	}
	return fmt.Errorf("namespace %q: want 1 to 32 letters, digits, '_' or '-', starting with a letter or digit", ns)
}

// NamespacePrefix is what a namespace puts before every partition key of
// the table: "ns/NAME#" ("" for none). Unnamespaced partition keys start
// with "arn:", WorkersPrefix or SweepPrefix, never with "ns/", and a
// namespace holds no '#', so two namespaces never share a partition.
func NamespacePrefix(ns string) string {
	if ns == "" {
		return ""
	}
	return "ns/" + ns + "#"
}

// namespaced prefixes the partition key (AttrStream) of every item a call
// names: the Key of GetItem, UpdateItem and DeleteItem, the Item of
// PutItem, and the ":p" value of Query (QueryRows' key condition). Items
// read back keep the prefix in AttrStream, which DecodeRow does not read.
// It is the one place a namespace applies, so the table's users (lease,
// checkpoint, sweep/state) name partitions as if there were none.
type namespaced struct {
	c      DynamoAPI
	prefix string
}

// withPrefix returns a copy of m whose attr, a string, is prefixed.
func (n namespaced) withPrefix(m map[string]types.AttributeValue, attr string) map[string]types.AttributeValue {
	v, ok := m[attr].(*types.AttributeValueMemberS)
	if !ok {
		return m
	}
	out := maps.Clone(m)
	out[attr] = &types.AttributeValueMemberS{Value: n.prefix + v.Value}
	return out
}

func (n namespaced) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return n.c.CreateTable(ctx, in, fns...)
}

func (n namespaced) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return n.c.DescribeTable(ctx, in, fns...)
}

func (n namespaced) GetItem(ctx context.Context, in *dynamodb.GetItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	cp := *in
	cp.Key = n.withPrefix(in.Key, AttrStream)
	return n.c.GetItem(ctx, &cp, fns...)
}

func (n namespaced) PutItem(ctx context.Context, in *dynamodb.PutItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	cp := *in
	cp.Item = n.withPrefix(in.Item, AttrStream)
	return n.c.PutItem(ctx, &cp, fns...)
}

func (n namespaced) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	cp := *in
	cp.Key = n.withPrefix(in.Key, AttrStream)
	return n.c.UpdateItem(ctx, &cp, fns...)
}

func (n namespaced) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	cp := *in
	cp.Key = n.withPrefix(in.Key, AttrStream)
	return n.c.DeleteItem(ctx, &cp, fns...)
}

func (n namespaced) Query(ctx context.Context, in *dynamodb.QueryInput, fns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	cp := *in
	cp.ExpressionAttributeValues = n.withPrefix(in.ExpressionAttributeValues, ":p")
	return n.c.Query(ctx, &cp, fns...)
}
