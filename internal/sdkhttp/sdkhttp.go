// Package sdkhttp is the HTTP client under the archiver's AWS SDK clients.
//
// It works around a race between smithy-go and net/http that fails a small
// share of successful calls and costs each of them a retry backoff of up
// to two seconds:
//
//  1. net/http writes a request body of known length, then reads the body
//     once more to check that nothing follows it.
//  2. The server may answer as soon as it has the body. smithy-go closes
//     the request body as soon as the response headers arrive.
//  3. When the close comes between the two, the check reads the closed
//     body through its WriteTo method, which answers io.EOF as an error.
//     net/http takes that for a failed write and closes the connection
//     while the response body is still being read.
//  4. The call fails with "use of closed network connection" under an
//     HTTP 200, and the SDK retries it after its backoff.
//
// The archiver's GetRecords calls hit this a few times a minute on a busy
// machine, and each such call took 0.2 to 1.7 s instead of a millisecond.
// That was the tail of the deletion-to-JetStream latency.
// (aws/aws-sdk-go-v2#2737 and #1825 report the same error.) Hiding WriteTo
// leaves net/http plain reads, and a closed body then reads as an ordinary
// end of the body.
package sdkhttp

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Client returns c wrapped so that a request body closed by the SDK while
// net/http still reads it no longer fails the call. A nil c stands for the
// SDK's default client. Wrapping twice is harmless; Client returns a client
// it already wrapped unchanged.
func Client(c aws.HTTPClient) aws.HTTPClient {
	if _, done := c.(client); done {
		return c
	}
	if c == nil {
		c = awshttp.NewBuildableClient()
	}
	return client{c}
}

type client struct{ next aws.HTTPClient }

func (c client) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return c.next.Do(req)
	}
	r := req.WithContext(req.Context()) // a shallow copy: the caller's request stays as it was
	r.Body = readOnly{req.Body}
	return c.next.Do(r)
}

// readOnly shows net/http only the Read and Close of a request body.
type readOnly struct{ io.ReadCloser }
