package subscribe_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies holds the package to what a subscriber should pull in:
// of this module, the leaf packages natsmsg and event only, and
// internal/ddbjson, event's one leaf (the SDK's attribute-value types and
// nothing of ours); no AWS client, no nats-server, no sink, engine or S3
// code.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowedOurs := map[string]bool{
		"github.com/ttl-archiver/archiver/subscribe":        true,
		"github.com/ttl-archiver/archiver/natsmsg":          true,
		"github.com/ttl-archiver/archiver/event":            true,
		"github.com/ttl-archiver/archiver/internal/ddbjson": true,
	}
	forbidden := []string{
		"github.com/aws/aws-sdk-go-v2/aws",                       // any AWS client
		"github.com/aws/aws-sdk-go-v2/service/s3",                //
		"github.com/nats-io/nats-server",                         //
		"go.uber.org/zap",                                        // the sinks' logging
		"github.com/prometheus/client_golang",                    // the sinks' metrics
		"github.com/aws/aws-sdk-go-v2/service/dynamodb/internal", // the DynamoDB client
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/ttl-archiver/archiver/") && !allowedOurs[p] {
			t.Errorf("subscribe depends on %s", p)
		}
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("subscribe depends on %s", p)
			}
		}
	}
}
