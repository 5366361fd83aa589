package engine

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
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
