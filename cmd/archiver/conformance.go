package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/conformance"
	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/redact"
)

const conformanceUsage = `usage: archiver conformance --endpoint URL [flags]

Measure how closely a DynamoDB-compatible endpoint follows DynamoDB's TTL
and Streams behaviour: one line per check (PASS, FAIL or SKIP, what it
found, the delay it measured, how long it took), a summary and a grade.
Each check creates its own tables (named conformance-...) and deletes
them. docs/CONFORMANCE.md says what each check asserts and why.
Exit 0 when every check that applies passes, 1 otherwise.

flags:
`

// conformanceFlags are the flags of archiver conformance.
type conformanceFlags struct {
	endpoint, region, other, only, skip string
	bound                               time.Duration
	control, slow, json, list           bool
}

func parseConformanceFlags(args []string, e env) (*conformanceFlags, error) {
	f := &conformanceFlags{}
	fs := flag.NewFlagSet("archiver conformance", flag.ContinueOnError)
	endpoint := &cli.TypedString{TypeName: "url"}
	fs.Var(endpoint, "endpoint", "the endpoint to measure, e.g. http://127.0.0.1:8000 (default: AWS's own for --region)")
	fs.StringVar(&f.region, "region", "", "the Region of the tables (default: the AWS configuration's; us-east-1 for a loopback endpoint)")
	fs.StringVar(&f.other, "other-region", "", "the Region of global-replicas' replica (default us-west-2; us-east-1 when --region is us-west-2)")
	fs.DurationVar(&f.bound, "expiry-bound", 2*time.Minute, "how long an expired item may take to be deleted (and a record or a replicated write to arrive); DynamoDB documents up to 48 hours")
	fs.BoolVar(&f.control, "engine-control", false, "the endpoint is this project's engine: sweep TTL, move its clock (with --manual-clock), close shards and trim streams through its /_engine/ control API instead of waiting")
	fs.BoolVar(&f.slow, "slow", false, "also wait in real time for what takes minutes: an iterator's 15-minute lifetime (else that check skips without --engine-control)")
	fs.StringVar(&f.only, "only", "", "comma-separated checks to run (default: all; --list names them)")
	fs.StringVar(&f.skip, "skip", "", "comma-separated checks not to run")
	fs.BoolVar(&f.json, "json", false, "print the report as one JSON object instead of lines")
	fs.BoolVar(&f.list, "list", false, "print the checks and what each asserts, and exit")
	if err := cli.ParseFlags(fs, args, e.stdout, conformanceUsage); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("archiver conformance: unexpected argument %q", fs.Arg(0))
	}
	f.endpoint = endpoint.Text
	var probs cli.Problems
	if f.endpoint != "" {
		if err := checkHTTPURL(f.endpoint); err != nil {
			probs.Add("--endpoint: %v", err)
		}
	}
	for _, r := range []struct{ flag, val string }{{"region", f.region}, {"other-region", f.other}} {
		if r.val != "" && !cli.IsRegion(r.val) {
			probs.Add("--%s: %q is not a region name like us-east-1", r.flag, r.val)
		}
	}
	if f.bound <= 0 {
		probs.Add("--expiry-bound: %s must be positive", f.bound)
	}
	if f.control && f.endpoint == "" {
		probs.Add("--engine-control: needs --endpoint, the engine's address")
	}
	if _, err := conformance.Select(conformance.Checks(), splitList(f.only, false), splitList(f.skip, false)); err != nil {
		probs.Add("--only, --skip: %v", err)
	}
	return f, probs.Err("archiver conformance")
}

// conformanceCmd runs the conformance suite against an endpoint.
func conformanceCmd(ctx context.Context, args []string, e env) error {
	f, err := parseConformanceFlags(args, e)
	if err != nil {
		return err
	}
	if f.list {
		for _, c := range conformance.Checks() {
			fmt.Fprintf(e.stdout, "%-24s %s\n", c.Name, c.Asserts)
		}
		return nil
	}
	checks, _ := conformance.Select(conformance.Checks(), splitList(f.only, false), splitList(f.skip, false))
	cenv, err := conformanceEnv(ctx, f, e)
	if err != nil {
		return err
	}
	if err := cenv.Ping(ctx); err != nil {
		return fmt.Errorf("%s does not answer as DynamoDB: %w", orAWS(f.endpoint), err)
	}
	each := func(r conformance.Result) { fmt.Fprintln(e.stdout, r.Line()) }
	if f.json {
		each = nil
	} else {
		fmt.Fprintf(e.stdout, "conformance of %s (%s, expiry bound %v%s)\n", orAWS(f.endpoint), cenv.Region, f.bound, map[bool]string{true: ", engine control"}[f.control])
	}
	rep := conformance.Run(ctx, cenv, checks, each)
	if f.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprint(e.stdout, rep.Summary())
	}
	switch {
	case rep.NotRun > 0:
		return fmt.Errorf("interrupted: %d of %d checks not run", rep.NotRun, len(checks))
	case rep.Failed > 0:
		return fmt.Errorf("%d of %d applicable checks failed (grade %s)", rep.Failed, rep.Passed+rep.Failed, rep.Grade)
	}
	return nil
}

// conformanceEnv builds the suite's clients of the endpoint, in --region
// and (for global-replicas) in any other.
func conformanceEnv(ctx context.Context, f *conformanceFlags, e env) (*conformance.Env, error) {
	log, err := logging.New(e.stderr, "warn", logging.FormatConsole)
	if err != nil {
		return nil, err
	}
	awsCfg, err := loadAWSConfig(ctx, "conformance", f.region, f.endpoint, log)
	if err != nil {
		return nil, err
	}
	db, st := endpointClients(awsCfg, f.endpoint)
	other := f.other
	if other == "" {
		other = map[bool]string{true: "us-east-1", false: "us-west-2"}[awsCfg.Region == "us-west-2"]
	}
	cenv := &conformance.Env{Endpoint: redact.URL(f.endpoint), DynamoDB: db, Streams: st, Region: awsCfg.Region, OtherRegion: other,
		Bound: f.bound, Slow: f.slow,
		In: func(region string) (*dynamodb.Client, *dynamodbstreams.Client) {
			c := awsCfg.Copy()
			c.Region = region
			return endpointClients(c, f.endpoint)
		}}
	if f.control {
		cenv.Control = conformance.NewControl(f.endpoint)
	}
	return cenv, nil
}

// orAWS names an endpoint for a header: AWS's own when it is empty.
func orAWS(endpoint string) string {
	if endpoint == "" {
		return "AWS"
	}
	return redact.URL(endpoint)
}
