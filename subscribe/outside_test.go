package subscribe_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSubscriberOutsideTheModule builds and runs testdata/subscriber, a
// module of its own that requires the archiver through a replace, as a
// downstream team's subscriber would: it decodes every message of the
// four streams with package subscribe and unmarshals each item into its
// own struct with attributevalue.UnmarshalMap.
func TestSubscriberOutsideTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module (-short)")
	}
	addr, _ := archiveToNATS(t)
	names := make([]string, len(streams))
	for i, s := range streams {
		names[i] = s.name
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", ".", "nats://" + addr, fmt.Sprint(expiries)}, names...)...)
	cmd.Dir = filepath.Join("testdata", "subscriber")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run testdata/subscriber: %v\n%s", err, out)
	}
	for _, name := range names {
		if !strings.Contains(string(out), fmt.Sprintf("%s %d\n", name, expiries)) {
			t.Errorf("the subscriber did not read %d messages of %s:\n%s", expiries, name, out)
		}
	}
}
