package engine

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzRequestRegion: whatever Authorization or X-Amz-Credential a request
// carries, requestRegion answers a valid Region or a 400 naming the
// value, never a panic, and a well-formed scope's Region is the one used.
func FuzzRequestRegion(f *testing.F) {
	for _, s := range []string{
		"AWS4-HMAC-SHA256 Credential=AKID/20261101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
		"AWS4-HMAC-SHA256 Credential=AKID/20261101/eu-west-1/dynamodb/aws4_request",
		"Credential=a/b/c/d/aws4_request",
		"Credential=a/b//d/aws4_request",
		"Credential=a/b/UPPER/d/aws4_request",
		"Credential=////",
		"Credential=",
		"Credential=a/b/\xff\xfe/d/aws4_request",
		"",
	} {
		f.Add(s, "")
		f.Add("", strings.TrimPrefix(s, "AWS4-HMAC-SHA256 Credential="))
	}
	f.Fuzz(func(t *testing.T, auth, query string) {
		r := &http.Request{Header: http.Header{}, URL: &url.URL{RawQuery: "X-Amz-Credential=" + url.QueryEscape(query)}}
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		region, err := requestRegion(r, "us-east-1")
		if err != nil {
			if !strings.Contains(err.Error(), "Credential should be scoped to a valid region") {
				t.Fatalf("error %v does not say what is wrong", err)
			}
			return
		}
		if !validRegion(region) {
			t.Fatalf("requestRegion(%q, %q) = %q: not a valid Region", auth, query, region)
		}
		cred := credentialOf(auth)
		if cred == "" {
			cred = query
		}
		if got, ok := scopeRegion(cred); ok && got != region {
			t.Fatalf("scope %q names %q, requestRegion chose %q", cred, got, region)
		}
	})
}

// A context derived from a request's still carries its Region, and a Go
// call's context none.
func TestRegionContext(t *testing.T) {
	e := &Engine{o: Options{Region: "us-east-1"}}
	ctx := withRegion(t.Context(), "eu-west-1")
	derived, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for name, c := range map[string]context.Context{"the request's": ctx, "derived": derived} {
		if r, fixed := e.regionFor(c); r != "eu-west-1" || !fixed {
			t.Errorf("%s context: %s, %v; want eu-west-1, fixed", name, r, fixed)
		}
	}
	if r, fixed := e.regionFor(context.Background()); r != "us-east-1" || fixed {
		t.Errorf("a Go call's context: %s, %v; want us-east-1, not fixed", r, fixed)
	}
	if derived.Done() == nil || ctx.Value(struct{}{}) != nil {
		t.Error("the request's context lost its parent's Done or answers a foreign key")
	}
}

// BenchmarkRequestRegion is the Region work of one request, as Regions
// added it to ServeHTTP: the credential scope read from an SDK's
// Authorization header, the context carrying it, and a handler's lookup
// of it.
func BenchmarkRequestRegion(b *testing.B) {
	e := &Engine{o: Options{Region: "us-east-1"}}
	r := &http.Request{Header: http.Header{}, URL: &url.URL{}}
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261126/us-east-1/dynamodb/aws4_request, "+
		"SignedHeaders=accept-encoding;amz-sdk-invocation-id;amz-sdk-request;content-length;content-type;host;x-amz-date;x-amz-target, "+
		"Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	parent := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		region, err := requestRegion(r, e.o.Region)
		if err != nil {
			b.Fatal(err)
		}
		if got, _ := e.regionFor(withRegion(parent, region)); got != "us-east-1" {
			b.Fatal(got)
		}
	}
}
