package filesink

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/smallfs"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// TestFileSinkFullDisk fills a real 2 MiB tmpfs holding the sink's
// directory (skipped where mounting is not permitted), in both formats:
// the batch the disk refuses fails with ENOSPC, not permanently, and
// leaves no partial line, file or temporary file behind; a manifest the
// full disk refuses fails the same way; once space is freed the batch
// re-delivered and the manifest go through, and the archive holds every
// event once, proven complete by its manifests.
func TestFileSinkFullDisk(t *testing.T) {
	for _, format := range []string{sinkurl.FormatNDJSON, sinkurl.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			fs := smallfs.Mount(t, "2m")
			dir := filepath.Join(fs, "archive")
			s, err := NewWith(sinkurl.FileConfig{Dir: dir, Format: format}, sinkapi.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			ballast := smallfs.Fill(t, fs, 256<<10)
			evs := incompressible(testkit.Events("sessions", "shardId-a", 1, 400), 16<<10)
			const per = 4
			refused := -1
			for i := 0; i+per <= len(evs) && refused < 0; i += per {
				err := appendBatch(t, s, evs[i:i+per])
				switch {
				case err == nil:
				case errors.Is(err, syscall.ENOSPC) && !sinkapi.IsPermanent(err):
					refused = i
				default:
					t.Fatalf("batch %d: %v (permanent %v), want ENOSPC, not permanent", i/per, err, sinkapi.IsPermanent(err))
				}
			}
			if refused < 0 {
				t.Fatalf("a 2 MiB disk took %d events of 16 KiB", len(evs))
			}
			if tmp := tempFiles(t, dir); len(tmp) > 0 {
				t.Errorf("the refused batch left temporary files: %q", tmp)
			}
			full := smallfs.FillUp(t, fs)
			r := testkit.RangeOf(evs[0], "", "", evs[refused-1].SequenceNumber)
			if err := s.Record(ctx, r); !errors.Is(err, syscall.ENOSPC) || sinkapi.IsPermanent(err) {
				t.Fatalf("Record on a full disk: %v (permanent %v), want ENOSPC, not permanent", err, sinkapi.IsPermanent(err))
			}
			for _, p := range []string{ballast, full} {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			last := refused + 2*per // the refused batch again, and one more
			for i := refused; i < last; i += per {
				if err := appendBatch(t, s, evs[i:i+per]); err != nil {
					t.Fatalf("batch %d after space was freed: %v", i/per, err)
				}
			}
			r = testkit.RangeOf(evs[0], "", "", evs[last-1].SequenceNumber)
			r.Ended = true
			if err := s.Record(ctx, r); err != nil {
				t.Fatalf("Record after space was freed: %v", err)
			}
			checkComplete(t, dir, int64(last))
		})
	}
}

// incompressible gives each event a blob of n random bytes (seeded), so
// that neither format's compression shrinks it.
func incompressible(evs []event.Event, n int) []event.Event {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range evs {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		evs[i].OldImage["blob"] = &types.AttributeValueMemberB{Value: b}
	}
	return evs
}

// tempFiles lists the temporary files (.NAME.tmp) below dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, rel := range dataFiles(t, dir) {
		if name := filepath.Base(rel); strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") {
			out = append(out, rel)
		}
	}
	return out
}
