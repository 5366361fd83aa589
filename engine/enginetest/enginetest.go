// Package enginetest is the shared test bed: one engine served over real
// HTTP on a loopback port for one test, with the real SDK's DynamoDB and
// DynamoDB Streams clients pointed at it (static credentials), and the
// one helper that creates a table with a stream, TTL and indexes.
//
// It imports the engine, the SDK and internal/sdkhttp, the leaf every SDK
// client of this module sends through (a request body the SDK closes while
// net/http still reads it would otherwise fail a call now and then, most
// often a large GetRecords on a busy machine); the engine imports nothing
// of ours, this package included. Fault injection is the engine's own: a hook set
// in Options.Hooks and swapped with (*engine.Engine).SetHook, and the
// engine's fault methods.
package enginetest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// Region is the region of the bed's engine and clients.
const Region = "us-east-1"

// DefaultKey is the access key the bed's own clients sign with.
const DefaultKey = "test"

// Bed is an engine listening on a free loopback port, and SDK clients for
// it. The test's cleanup closes the clients' idle connections, then the
// server.
type Bed struct {
	Server   *engine.Server
	Engine   *engine.Engine
	Endpoint string // the server's base URL, "http://127.0.0.1:PORT"
	// DynamoDB and Streams sign with DefaultKey and retry as the SDK's
	// defaults do.
	DynamoDB *dynamodb.Client
	Streams  *dynamodbstreams.Client

	httpClient aws.HTTPClient
}

// Start starts an engine with options o as they are (the engine's zero
// defaults apply: a TTL sweep every second unless o.TTLInterval is
// negative) and fails the test if it cannot listen.
func Start(t testing.TB, o engine.Options) *Bed {
	t.Helper()
	srv, err := engine.Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatalf("engine.Listen: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	// A connection a client dialled but never used would hold the
	// server's graceful shutdown for seconds: the cleanups run last
	// registered first, so these close before the server does.
	tr := awshttp.NewBuildableClient().GetTransport() // the SDK's defaults
	t.Cleanup(tr.CloseIdleConnections)
	b := &Bed{Server: srv, Engine: srv.Engine(), Endpoint: srv.Endpoint(), httpClient: sdkhttp.Client(&http.Client{Transport: tr})}
	b.DynamoDB = b.Client(DefaultKey)
	b.Streams = b.StreamsClient(DefaultKey)
	return b
}

// Client is a DynamoDB client of the bed signing with accessKey (a hook
// tells callers apart by it: AccessKey); opts adjust it, e.g. its
// retries.
func (b *Bed) Client(accessKey string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return ClientAt(b.Endpoint, accessKey, append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.HTTPClient = b.httpClient }}, opts...)...)
}

// StreamsClient is a DynamoDB Streams client of the bed signing with
// accessKey; opts adjust it.
func (b *Bed) StreamsClient(accessKey string, opts ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return StreamsClientAt(b.Endpoint, accessKey, append([]func(*dynamodbstreams.Options){func(o *dynamodbstreams.Options) { o.HTTPClient = b.httpClient }}, opts...)...)
}

// Regional is a DynamoDB and a DynamoDB Streams client of one Region.
type Regional struct {
	Region   string
	DynamoDB *dynamodb.Client
	Streams  *dynamodbstreams.Client
}

// In returns clients of the bed signing with DefaultKey whose requests are
// for region: the same endpoint, the Region set in their options as in an
// aws.Config, so the SigV4 credential scope names it and the engine serves
// that Region's tables and streams.
func (b *Bed) In(region string) Regional {
	return Regional{Region: region,
		DynamoDB: b.Client(DefaultKey, func(o *dynamodb.Options) { o.Region = region }),
		Streams:  b.StreamsClient(DefaultKey, func(o *dynamodbstreams.Options) { o.Region = region })}
}

// ClientAt is a DynamoDB client for an endpoint that is not a bed's (a
// closed port, a proxy, an engine in another process), signing with
// accessKey and Secret.
func ClientAt(endpoint, accessKey string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: Region, BaseEndpoint: aws.String(endpoint), Credentials: Credentials(accessKey),
		HTTPClient: sdkhttp.Client(nil)}, opts...)
}

// StreamsClientAt is ClientAt for DynamoDB Streams.
func StreamsClientAt(endpoint, accessKey string, opts ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{Region: Region, BaseEndpoint: aws.String(endpoint), Credentials: Credentials(accessKey),
		HTTPClient: sdkhttp.Client(nil)}, opts...)
}

// Secret is the secret key of every client here: distinctive, so a test
// can check that no error or log line shows it.
const Secret = "s3cr3t-value"

// Credentials are static credentials with accessKey and Secret: the
// engine checks no signature, and a hook reads the key back.
func Credentials(accessKey string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(accessKey, Secret, "")
}

// AccessKey is the SigV4 access key of a request the engine's hook sees
// ("" when the request is not signed).
func AccessKey(r *http.Request) string {
	a := r.Header.Get("Authorization")
	i := strings.Index(a, "Credential=")
	if i < 0 {
		return ""
	}
	key, _, _ := strings.Cut(a[i+len("Credential="):], "/")
	return key
}
