// Package conformance measures how closely a DynamoDB-compatible endpoint
// follows DynamoDB's documented Time to Live and Streams behaviour: expiry
// within a bound the caller states, the five-year rule, Number-only TTLs,
// the service identity and old image of a TTL deletion, index entries
// removed with it, expired items still readable until then, stream records
// only for real changes, shard lineage, ShardFilter, iterator expiry, trim
// horizon and global-table replicas. docs/CONFORMANCE.md says what each
// check asserts and why, with the AWS documentation behind it.
//
// It speaks to the endpoint only through aws-sdk-go-v2's DynamoDB and
// DynamoDB Streams clients (and, for this project's engine when asked,
// the engine's /_engine/ control API over plain HTTP): it imports no
// engine code, so any endpoint is measured the same way. Each check
// creates its own uniquely named tables and deletes them when it ends.
package conformance

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// Status is a check's verdict.
type Status string

// The verdicts. Skip is for what the endpoint cannot be asked (it has no
// global tables) or what this run cannot measure (a 15-minute wait it was
// not allowed); a check whose feature is missing or wrong fails.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Outcome is what one check found: its verdict, why, and the delay it
// measured (a deletion's delay after the item's TTL; 0 when it measures
// none).
type Outcome struct {
	Status Status
	Detail string
	Delay  time.Duration
}

func passf(format string, a ...any) Outcome {
	return Outcome{Status: Pass, Detail: fmt.Sprintf(format, a...)}
}

func failf(format string, a ...any) Outcome {
	return Outcome{Status: Fail, Detail: fmt.Sprintf(format, a...)}
}

func skipf(format string, a ...any) Outcome {
	return Outcome{Status: Skip, Detail: fmt.Sprintf(format, a...)}
}

// failed is the outcome of a call the check could not do without: what
// it was doing and the error.
func failed(what string, err error) Outcome { return failf("%s: %v", what, short(err)) }

// Check is one assertion about the endpoint: a name, what it asserts (one
// sentence, shown by --list and in the docs), and Run, which measures it.
type Check struct {
	Name    string
	Asserts string
	Run     func(ctx context.Context, e *Env) Outcome
}

// Result is a check's outcome as reported: one line of output, one entry
// of the JSON report.
type Result struct {
	Name    string        `json:"name"`
	Asserts string        `json:"asserts"`
	Status  Status        `json:"status"`
	Detail  string        `json:"detail"`
	Delay   time.Duration `json:"delayNanos,omitempty"`
	Took    time.Duration `json:"tookNanos"`
}

// Report is a whole run: the endpoint, what it was measured with, every
// result, the counts and the grade.
type Report struct {
	Endpoint      string        `json:"endpoint"`
	Region        string        `json:"region"`
	ExpiryBound   time.Duration `json:"expiryBoundNanos"`
	EngineControl bool          `json:"engineControl"`
	Results       []Result      `json:"checks"`
	Passed        int           `json:"passed"`
	Failed        int           `json:"failed"`
	Skipped       int           `json:"skipped"`
	Grade         string        `json:"grade"`
	// NotRun counts the checks left when the run's context ended (an
	// interrupt) before they started.
	NotRun int `json:"notRun,omitempty"`
}

// Select returns the checks named in only (all when empty) less those in
// skip, in the suite's order; a name that is no check's is an error
// naming it and the known names.
func Select(all []Check, only, skip []string) ([]Check, error) {
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = c.Name
	}
	for _, n := range append(slices.Clone(only), skip...) {
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("no check named %q (the checks: %s)", n, strings.Join(names, ", "))
		}
	}
	var out []Check
	for _, c := range all {
		if (len(only) == 0 || slices.Contains(only, c.Name)) && !slices.Contains(skip, c.Name) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Run runs checks one after another against e and returns the report;
// each, when not nil, is called with every result as its check ends (for
// a line of output while the run goes on). A check that panics (an SDK
// decoding an answer no DynamoDB gives) fails, naming the panic. When ctx
// ends, the run stops before the next check and the report says so.
func Run(ctx context.Context, e *Env, checks []Check, each func(Result)) Report {
	rep := Report{Endpoint: e.Endpoint, Region: e.Region, ExpiryBound: e.Bound, EngineControl: e.Control != nil}
	run := e.newRun()
	for i, c := range checks {
		if ctx.Err() != nil {
			rep.NotRun = len(checks) - i
			break
		}
		r := run.one(ctx, c)
		rep.Results = append(rep.Results, r)
		switch r.Status {
		case Pass:
			rep.Passed++
		case Fail:
			rep.Failed++
		default:
			rep.Skipped++
		}
		if each != nil {
			each(r)
		}
	}
	rep.Grade = Grade(rep.Passed, rep.Passed+rep.Failed)
	return rep
}

// one runs c with an Env of its own and deletes the tables it made.
func (e *Env) one(ctx context.Context, c Check) (r Result) {
	ce := e.forCheck(c.Name)
	start := time.Now()
	r = Result{Name: c.Name, Asserts: c.Asserts}
	defer func() {
		if p := recover(); p != nil {
			r.Status, r.Detail = Fail, fmt.Sprintf("panic: %v (at %s)", p, panicSite(debug.Stack()))
		}
		if err := ce.cleanup(); err != nil {
			r.Detail += fmt.Sprintf(" (cleanup: %v)", short(err))
		}
		r.Took = time.Since(start)
	}()
	out := c.Run(ctx, ce)
	r.Status, r.Detail, r.Delay = out.Status, out.Detail, out.Delay
	if ctx.Err() != nil && r.Status == Fail { // it failed because the run was stopped
		r.Status, r.Detail = Skip, "interrupted: "+r.Detail
	}
	return r
}

// Grade is the letter for passed of applicable checks (those that did not
// skip): A all of them, B at least 85%, C 70%, D 50%, F below; "-" when
// none applied.
func Grade(passed, applicable int) string {
	if applicable == 0 {
		return "-"
	}
	share := float64(passed) / float64(applicable)
	switch {
	case passed == applicable:
		return "A"
	case share >= 0.85:
		return "B"
	case share >= 0.70:
		return "C"
	case share >= 0.50:
		return "D"
	}
	return "F"
}

// Summary is the report's closing lines: the counts, the skipped checks
// with their reasons, and the grade.
func (r Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "conformance: %d passed, %d failed, %d skipped\n", r.Passed, r.Failed, r.Skipped)
	for _, res := range r.Results {
		if res.Status == Skip {
			fmt.Fprintf(&b, "  skipped %s: %s\n", res.Name, res.Detail)
		}
	}
	if r.NotRun > 0 {
		fmt.Fprintf(&b, "interrupted: %d checks not run\n", r.NotRun)
	}
	fmt.Fprintf(&b, "grade: %s (%d of %d applicable checks passed)\n", r.Grade, r.Passed, r.Passed+r.Failed)
	return b.String()
}

// Line is a result as one line of output: verdict, name, detail, the
// delay measured and the time the check took.
func (r Result) Line() string {
	detail := strings.ReplaceAll(r.Detail, "\n", " ")
	took := "took " + round(r.Took).String()
	if r.Delay > 0 {
		took = "delay " + round(r.Delay).String() + ", " + took
	}
	return fmt.Sprintf("%s %-22s — %s (%s)", r.Status, r.Name, detail, took)
}

// round shortens d for people: milliseconds below a minute, else seconds.
func round(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// panicSite is the function and line a panic came from, read off the
// stack of the goroutine that recovered it.
func panicSite(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") && i+3 < len(lines) {
			return fmt.Sprintf("%s %s", strings.TrimSpace(lines[i+2]), strings.TrimSpace(lines[i+3]))
		}
	}
	return "unknown"
}
