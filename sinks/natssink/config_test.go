package natssink

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinkurl"
)

func TestParseNATS(t *testing.T) {
	p, err := sinkurl.Parse("nats://alice:pw@h1:4222,h2:4223?subject=ttl.{table}.{pk}&jetstream=false&format=item&max-pending-bytes=1MiB")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Servers, []string{"nats://h1:4222", "nats://h2:4223"}) || c.User != "alice" || c.Password != "pw" ||
		c.Subject != "ttl.{table}.{pk}" || c.JetStream || c.Format != "item" || c.MaxPendingBytes != 1<<20 {
		t.Fatalf("got %+v", c)
	}
	// cloudevents is the default; envelope is one parameter away.
	for q, want := range map[string]string{"": natsmsg.FormatCloudEvents, "?format=envelope": natsmsg.FormatEnvelope} {
		p, _ := sinkurl.Parse("nats://h1:4222" + q)
		if c, err := ParseConfig(p); err != nil || c.Format != want {
			t.Errorf("%q: format %q, %v; want %q", q, c.Format, err, want)
		}
	}
	if got := redact.URL("nats://alice:pw@h1:4222?token=abc&subject=x"); strings.Contains(got, "pw") || strings.Contains(got, "abc") {
		t.Fatalf("redact.URL leaks: %s", got)
	}
}
