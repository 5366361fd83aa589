package sdkhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// closingBody is a request body that behaves like the one smithy-go hands
// net/http: once closed, Read and WriteTo answer io.EOF. WriteTo also
// waits for the close, so that the race this package works around happens
// every time instead of now and then.
type closingBody struct {
	r      *bytes.Reader
	once   sync.Once
	closed chan struct{}
}

func newClosingBody(b []byte) *closingBody {
	return &closingBody{r: bytes.NewReader(b), closed: make(chan struct{})}
}

func (b *closingBody) Read(p []byte) (int, error) {
	select {
	case <-b.closed:
		return 0, io.EOF
	default:
		return b.r.Read(p)
	}
}

func (b *closingBody) WriteTo(io.Writer) (int64, error) {
	<-b.closed
	return 0, io.EOF
}

func (b *closingBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestBodyClosedWhenTheResponseArrives plays the race with the SDK's
// order of events: the server answers once it has read the request body;
// the caller closes the request body as soon as Do returns, as smithy-go
// does. Through Client the request's write ends without an error and the
// whole response arrives. Plain net/http is the control: there the
// write fails with io.EOF, which makes net/http close the connection under
// the response.
func TestBodyClosedWhenTheResponseArrives(t *testing.T) {
	const want = "the response body"
	goOn := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(want)))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-goOn:
			io.WriteString(w, want)
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(goOn)

	for _, tc := range []struct {
		name         string
		client       func(hc *http.Client) aws.HTTPClient
		wantWriteErr bool
	}{
		{"through Client", func(hc *http.Client) aws.HTTPClient { return Client(hc) }, false},
		{"plain net/http (the race)", func(hc *http.Client) aws.HTTPClient { return hc }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := &http.Client{Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			wrote := make(chan error, 1)
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				WroteRequest: func(i httptrace.WroteRequestInfo) { wrote <- i.Err },
			})
			payload := []byte(`{"ShardIterator":"an iterator","Limit":1000}`)
			body := newClosingBody(payload)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(payload))
			resp, err := tc.client(hc).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body.Close() // what smithy-go does once Do returns
			werr := <-wrote
			if gotErr := werr != nil; gotErr != tc.wantWriteErr {
				t.Fatalf("writing the request ended with %v; want an error: %v", werr, tc.wantWriteErr)
			}
			if tc.wantWriteErr {
				return
			}
			goOn <- struct{}{}
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != want {
				t.Fatalf("response body %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestClientWrapsOnce(t *testing.T) {
	c := Client(nil)
	if _, ok := c.(client); !ok {
		t.Fatalf("Client(nil) is a %T", c)
	}
	if again := Client(c); again != c {
		t.Fatal("Client wrapped its own client again")
	}
}
