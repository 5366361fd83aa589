package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
)

// workload writes a wave every 2 s: four sessions expiring 1-4 s later,
// one long-lived session that a user then deletes, until ctx ends or
// stopAt (zero: never) passes.
func workload(ctx context.Context, ddb *dynamodb.Client, out *printer, archiveDir string, stopAt time.Time, expiring, deletes *atomic.Int64) error {
	users := []string{"user1", "user2", "user3", "user4", "user5"}
	wave := 0
	for {
		if !stopAt.IsZero() && time.Now().After(stopAt) {
			return nil
		}
		now := time.Now()
		for i := 0; i < 4; i++ {
			n := wave*4 + i
			session := fmt.Sprintf("s%05d", n)
			exp := now.Add(time.Duration(1+i) * time.Second).Unix()
			if err := PutSession(ctx, ddb, Table, users[n%len(users)], session, exp); err != nil {
				return err
			}
			expiring.Add(1)
		}
		// A session the user logs out of: a user delete, not an expiry.
		user, session := users[wave%len(users)], fmt.Sprintf("logout%04d", wave)
		if err := PutSession(ctx, ddb, Table, user, session, now.Add(24*time.Hour).Unix()); err != nil {
			return err
		}
		if _, err := ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(Table),
			Key: map[string]types.AttributeValue{
				"UserName":  &types.AttributeValueMemberS{Value: user},
				"SessionId": &types.AttributeValueMemberS{Value: session},
			},
		}); err != nil {
			return fmt.Errorf("delete %s/%s: %w", user, session, err)
		}
		deletes.Add(1)
		archived, _, _ := countArchive(archiveDir)
		out.printf("wrote    4 sessions expiring in 1-4s, and %s/%s deleted by the user (archive holds %d expired so far)\n",
			user, session, archived)
		wave++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// summarize counts what reached the archive, the archiver's metrics and
// the subscriber.
func summarize(metrics prometheus.Gatherer, sub *subscriber, archiveDir string, expiring, deletes int) (*Summary, error) {
	sum := &Summary{
		ExpiringWritten: expiring,
		UserDeletes:     deletes,
		ArchiveDir:      archiveDir,
	}
	var err error
	sum.Archived, sum.DeletesArchived, err = countArchive(archiveDir)
	if err != nil {
		return nil, err
	}
	sum.DeletesSeen = int(counterValue(metrics, "archiver_events_total", map[string]string{"kind": "deleted", "table": Table}))
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sum.Published = len(sub.published)
	sum.Measured = len(sub.lags)
	sum.LagP50, sum.LagMax = percentile(sub.lags, 0.5), percentile(sub.lags, 1)
	sum.NATSP50, sum.NATSMax = percentile(sub.latencies, 0.5), percentile(sub.latencies, 1)
	sum.BySweeper, sum.ByTTL = sub.byWhom["other"], sub.byWhom["dynamodb-ttl"]
	return sum, nil
}

// countArchive counts distinct expired and deleted events in the archive.
func countArchive(dir string) (expired, deleted int, err error) {
	kinds, err := ReadArchiveDir(dir)
	if err != nil {
		return 0, 0, err
	}
	return len(kinds["expired"]), len(kinds["deleted"]), nil
}

// counterValue sums the counter name's series whose labels match labels;
// 0 when reg is nil or fails.
func counterValue(reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	if reg == nil {
		return 0
	}
	fams, err := reg.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// percentile returns the q-quantile (nearest rank) of d; 0 when empty.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

// notMeasured stands for the lags when no expiry was measured.
const notMeasured = "n/a (no expiry arrived before the stop)"

// lags is "p50 / max" and what they measure, or notMeasured.
func (s *Summary) lags(p50, maxLag time.Duration, what string) string {
	if s.Measured == 0 {
		return notMeasured
	}
	return fmt.Sprintf("%s / %s %s", p50.Round(time.Millisecond), maxLag.Round(time.Millisecond), what)
}

// PrintSummary writes s as the demo's closing lines; what was not
// measured (no expiry arrived) says n/a, not zero.
func PrintSummary(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "\nsummary\n")
	pending := ""
	if n := s.ExpiringWritten - s.Published; n > 0 {
		pending = fmt.Sprintf(" (%d not yet expired when stopped)", n)
	}
	fmt.Fprintf(w, "  sessions written:     %d expiring, %d deleted by users%s\n", s.ExpiringWritten, s.UserDeletes, pending)
	fmt.Fprintf(w, "  expired archived:     %d\n", s.Archived)
	fmt.Fprintf(w, "  published on NATS:    %d\n", s.Published)
	fmt.Fprintf(w, "  user deletes seen:    %d (not archived: %d in the archive)\n", s.DeletesSeen, s.DeletesArchived)
	fmt.Fprintf(w, "  TTL lag p50/max:      %s\n", s.lags(s.LagP50, s.LagMax, "(deletion time - ExpirationTime)"))
	fmt.Fprintf(w, "  on NATS p50/max:      %s\n", s.lags(s.NATSP50, s.NATSMax, "after ExpirationTime"))
	if s.BySweeper > 0 {
		fmt.Fprintf(w, "  deleted by:           %d archiver sweep, %d the engine's TTL (which runs up to %s late here)\n",
			s.BySweeper, s.ByTTL, SlowTTL)
	}
	if s.ArchiveDir == "" {
		fmt.Fprintf(w, "  archive folder:       temporary, removed (--archive DIR keeps one)\n")
		return
	}
	fmt.Fprintf(w, "  archive folder:       %s\n", s.ArchiveDir)
}
