package natssink

import (
	"context"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

func TestNATSPreflight(t *testing.T) {
	t.Run("jetstream and core", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		ns := testkit.StartNATS(t, nil)
		_, js := ns.Client(t)
		testkit.CreateStream(t, js, "TTL", "archiver.>")
		for _, q := range []string{"", "?jetstream=false", "?subject=made.{table}&create-stream=MADE"} {
			s, _, err := open(ctx, "nats://"+ns.URL+q, sinkapi.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := testkit.Preflight(ctx, s); err != nil {
				t.Errorf("%s: %v", q, err)
			}
			s.Close(ctx)
		}
	})
	t.Run("stream deleted", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		s, url := openNATSWithoutStream(t, ctx)
		testkit.WantPreflightError(t, testkit.Preflight(ctx, s), url, sinkapi.CheckStreamCaptures, `no JetStream stream captures "archiver.*.*"`)
	})
	t.Run("server gone", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		ns := testkit.StartNATS(t, nil)
		s, _, err := open(ctx, "nats://"+ns.URL+"?jetstream=false", sinkapi.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		ns.Stop()
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		testkit.WantPreflightError(t, testkit.Preflight(pctx, s), "nats://"+ns.URL, sinkapi.CheckConnected)
	})
}
