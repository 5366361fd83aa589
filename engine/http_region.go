package engine

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// Regions. One endpoint serves every Region: a request's Region is the one
// its SigV4 credential scope names (Authorization's
// "Credential=AKID/DATE/REGION/SERVICE/aws4_request", or a presigned URL's
// X-Amz-Credential), as the real service is reached at one endpoint per
// Region. A request with no scope, or one that does not parse as a scope,
// is in Options.Region. Each Region has its own tables and streams; a
// table or stream ARN of another Region is not found there. Regions need
// no declaring: a Region is whatever a request names, and it holds
// something once a table is created there.

// tkey names a table: its Region and its name.
type tkey struct{ region, name string }

// regionCtxKey keys a request's Region in its context.
type regionCtxKey struct{}

// regionCtx is a request's context carrying its Region: one allocation a
// request, where context.WithValue makes two (its node, and the string
// boxed in an interface), and found without walking the context chain
// when handlers pass it on as they got it.
type regionCtx struct {
	context.Context
	region string
}

// Value answers the regionCtx itself for regionCtxKey, so a context
// derived from it still carries the Region.
func (c *regionCtx) Value(key any) any {
	if _, ok := key.(regionCtxKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// withRegion returns ctx carrying the Region of the request it serves.
func withRegion(ctx context.Context, region string) context.Context {
	return &regionCtx{Context: ctx, region: region}
}

// regionFor returns the Region a call acts in: the request's, with fixed
// set (an ARN of another Region is then not found), or for a Go API call,
// which carries none, Options.Region (an ARN then names its own Region).
func (e *Engine) regionFor(ctx context.Context) (region string, fixed bool) {
	if c, ok := ctx.(*regionCtx); ok {
		return c.region, true
	}
	if ctx != nil {
		if c, ok := ctx.Value(regionCtxKey{}).(*regionCtx); ok {
			return c.region, true
		}
	}
	return e.o.Region, false
}

// codeInvalidSignature is AWS's code for a request whose signature or
// credential scope it refuses.
const codeInvalidSignature = "InvalidSignatureException"

// maxRegionLen bounds a Region name (AWS's are at most 20-odd characters).
const maxRegionLen = 63

// ValidRegion reports whether name can be a Region the engine serves
// (Options.Region, a request's SigV4 scope): 1 to 63 lower-case letters,
// digits and hyphens, starting with a letter and not ending with a hyphen
// ("us-east-1", "eu-central-2", also "local"). It says nothing of whether
// AWS has such a Region: a local engine serves any.
func ValidRegion(name string) bool { return validRegion(name) }

// validRegion is ValidRegion.
func validRegion(name string) bool {
	if name == "" || len(name) > maxRegionLen || name[0] < 'a' || name[0] > 'z' || name[len(name)-1] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// scopeRegion returns the Region field of a SigV4 credential
// "AKID/DATE/REGION/SERVICE/aws4_request"; ok is false when cred is not of
// that form (five fields ending in aws4_request).
func scopeRegion(cred string) (region string, ok bool) {
	var f [5]string
	for i := 0; i < 4; i++ {
		j := strings.IndexByte(cred, '/')
		if j < 0 {
			return "", false
		}
		f[i], cred = cred[:j], cred[j+1:]
	}
	f[4] = cred
	if f[4] != "aws4_request" || f[0] == "" || f[1] == "" || f[3] == "" {
		return "", false
	}
	return f[2], true
}

// credentialOf returns the SigV4 credential of an Authorization header
// value (what follows "Credential=" up to the next comma or space), or "".
func credentialOf(auth string) string {
	const sigV4, cred = "AWS4-HMAC-SHA256 ", "Credential="
	var c string
	if strings.HasPrefix(auth, sigV4+cred) { // what every SDK sends: no search
		c = auth[len(sigV4+cred):]
	} else if i := strings.Index(auth, cred); i >= 0 {
		c = auth[i+len(cred):]
	} else {
		return ""
	}
	for j := 0; j < len(c); j++ {
		if c[j] == ',' || c[j] == ' ' {
			return c[:j]
		}
	}
	return c
}

// requestRegion returns the Region a request is for: its credential
// scope's, or def when it has no scope that parses. A scope that parses
// but names no valid Region is refused, as DynamoDB refuses it: a 400
// InvalidSignatureException naming the value.
func requestRegion(r *http.Request, def string) (string, error) {
	var cred string
	if a := r.Header["Authorization"]; len(a) > 0 { // the canonical key: no canonicalizing per request
		cred = credentialOf(a[0])
	}
	if cred == "" && r.URL.RawQuery != "" {
		cred = r.URL.Query().Get("X-Amz-Credential")
	}
	if cred == "" {
		return def, nil
	}
	region, ok := scopeRegion(cred)
	if !ok {
		return def, nil
	}
	if !validRegion(region) {
		return "", badRegion(region)
	}
	return region, nil
}

// badRegion is the refusal of a credential scope naming no valid Region,
// in AWS's words ("Credential should be scoped to a valid region, not
// 'X'. "), the value cut to a readable length.
func badRegion(region string) error {
	if len(region) > 2*maxRegionLen {
		region = region[:2*maxRegionLen] + "..."
	}
	return &awserr.Error{Code: codeInvalidSignature, Status: 400,
		Message: "Credential should be scoped to a valid region, not '" + strings.ToValidUTF8(region, "?") + "'. " +
			"(A Region is 1 to 63 lower-case letters, digits and hyphens, e.g. us-east-1; the engine serves any such Region.)"}
}

// regionsLocked lists the Regions that hold a table, and Options.Region,
// sorted. e.mu is held.
func (e *Engine) regionsLocked() []string {
	seen := map[string]bool{e.o.Region: true}
	for k := range e.tables {
		seen[k.region] = true
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Regions lists the Regions that hold a table, and Options.Region, sorted.
func (e *Engine) Regions() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.regionsLocked()
}

// arnRegion is the Region of a table or stream ARN ("" when it has none).
func arnRegion(arn string) string { return stream.ARNRegion(arn) }
