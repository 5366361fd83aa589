package checkpoint

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/internal/suggest"
)

// DynamoURL is a parsed `dynamodb://TABLE?endpoint=&region=&create=true`
// checkpoint location.
type DynamoURL struct {
	Table    string
	Endpoint string // "" = the region's AWS endpoint
	Region   string // "" = the default chain's region
	Create   bool   // create the table when missing
}

// dynamoURLParams are the parameters a dynamodb:// URL takes.
var dynamoURLParams = []string{"endpoint", "region", "create"}

// ParseDynamoURL parses a `dynamodb://TABLE[?endpoint=URL&region=R&create=BOOL]`
// checkpoint URL. Errors name the part that is wrong.
func ParseDynamoURL(raw string) (DynamoURL, error) {
	var d DynamoURL
	shown := redact.URL(raw) // the endpoint parameter may carry KEY:SECRET@
	u, err := url.Parse(raw)
	if err != nil {
		return d, fmt.Errorf("checkpoint URL %q: %s", shown, redact.ParseError(err))
	}
	if u.Scheme != "dynamodb" {
		return d, fmt.Errorf("checkpoint URL %q: scheme %q is not dynamodb://", shown, u.Scheme)
	}
	if u.Opaque != "" {
		return d, fmt.Errorf("checkpoint URL %q: want dynamodb://TABLE", shown)
	}
	if u.User != nil {
		return d, fmt.Errorf("checkpoint URL %q: user information is not allowed", shown)
	}
	if u.Port() != "" {
		return d, fmt.Errorf("checkpoint URL %q: table name must not contain a port", shown)
	}
	if u.Path != "" && u.Path != "/" {
		return d, fmt.Errorf("checkpoint URL %q: unexpected path after the table name", shown)
	}
	if u.Fragment != "" {
		return d, fmt.Errorf("checkpoint URL %q: unexpected #fragment", shown)
	}
	d.Table = u.Host
	if err := event.ValidTableName(d.Table); err != nil {
		return d, fmt.Errorf("checkpoint URL %q: table: %w", shown, err)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return d, fmt.Errorf("checkpoint URL %q: query: %s", shown, redact.ParseError(err))
	}
	// In order: with several bad parameters, the same one is named each
	// time.
	for _, name := range slices.Sorted(maps.Keys(q)) {
		vals := q[name]
		if len(vals) != 1 {
			return d, fmt.Errorf("checkpoint URL %q: parameter %s given %d times", shown, name, len(vals))
		}
		v := vals[0]
		switch name {
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return d, fmt.Errorf("checkpoint URL %q: parameter endpoint %q is not an http(s)://host[:port] URL", shown, redact.URL(v))
			}
			d.Endpoint = v
		case "region":
			if !event.ValidRegion(v) {
				return d, fmt.Errorf("checkpoint URL %q: parameter region %q is not a region name like eu-west-1", shown, v)
			}
			d.Region = v
		case "create":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return d, fmt.Errorf("checkpoint URL %q: parameter create %q is not true or false", shown, v)
			}
			d.Create = b
		default:
			hint := ""
			if near := suggest.Nearest(name, dynamoURLParams); near != "" {
				hint = "; did you mean " + near + "?"
			}
			return d, fmt.Errorf("checkpoint URL %q: unknown parameter %q%s (want endpoint, region or create)", shown, name, hint)
		}
	}
	return d, nil
}
