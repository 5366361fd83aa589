package engine_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkQuery is the engine's CPU per Query as make bench's engine
// section sends it: Limit 10 over one partition key of a pk+sk table with
// a NEW_AND_OLD_IMAGES stream (20,000 items, 20 to a partition), through
// ServeHTTP in the benchmark's goroutine, reporting the process's CPU per
// request (cpu-ns/op).
func BenchmarkQuery(b *testing.B) {
	eng := benchEngine(b)
	r, body, w := benchRequest(), bytes.NewReader(nil), &nullWriter{h: http.Header{}}
	benchReq{"DynamoDB_20120810.CreateTable", `{"TableName":"query","BillingMode":"PAY_PER_REQUEST",` +
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],` +
		`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"}],` +
		`"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"}}`}.serve(b, eng, r, body, w)
	const partitions, perPartition = 1000, 20
	for k := 0; k < partitions*perPartition; k++ {
		benchReq{"DynamoDB_20120810.PutItem", fmt.Sprintf(`{"TableName":"query","Item":{"pk":{"S":"p%d"},"sk":{"N":"%d"},"pad":{"S":"0123456789abcdef0123456789abcdef"}}}`, k%partitions, k)}.serve(b, eng, r, body, w)
	}
	reqs := make([]benchReq, partitions)
	for i := range reqs {
		reqs[i] = benchReq{"DynamoDB_20120810.Query", fmt.Sprintf(`{"TableName":"query","Limit":10,"KeyConditionExpression":"pk = :p","ExpressionAttributeValues":{":p":{"S":"p%d"}}}`, (i*7919)%partitions)}
	}
	serveLoop(b, eng, reqs)
}
