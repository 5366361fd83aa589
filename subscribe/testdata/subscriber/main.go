// Command subscriber is a subscriber outside the archiver's module, as a
// downstream team writes one: it reads every message of the JetStream
// streams named on its command line, decodes each with package subscribe
// and unmarshals each item into its own struct with the AWS SDK's
// attributevalue. It prints "STREAM N" per stream and exits 1 on the
// first message it cannot read. TestSubscriberOutsideTheModule runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/subscribe"
)

// order is this subscriber's own view of an item.
type order struct {
	PK      string   `dynamodbav:"pk"`
	SK      int      `dynamodbav:"sk"`
	Expires int64    `dynamodbav:"expires"`
	S       string   `dynamodbav:"s"`
	N38     string   `dynamodbav:"n38"`
	T       bool     `dynamodbav:"t"`
	L       []any    `dynamodbav:"l"`
	M       struct{} `dynamodbav:"m"`
}

// lossless is what the formats that keep types (cloudevents, envelope)
// also give: binary as bytes and sets as sets.
type lossless struct {
	B  []byte   `dynamodbav:"b"`
	SS []string `dynamodbav:"ss,stringset"`
	NS []string `dynamodbav:"ns,numberset"`
	BS [][]byte `dynamodbav:"bs"`
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: subscriber NATS-URL COUNT STREAM...")
		os.Exit(2)
	}
	var want int
	fmt.Sscan(os.Args[2], &want)
	if err := run(os.Args[1], want, os.Args[3:]); err != nil {
		fmt.Fprintln(os.Stderr, "subscriber:", err)
		os.Exit(1)
	}
}

func run(url string, want int, streams []string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, stream := range streams {
		cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return fmt.Errorf("%s: %w", stream, err)
		}
		n := 0
		for n < want {
			m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
			if err != nil {
				return fmt.Errorf("%s: after %d messages: %w", stream, n, err)
			}
			if err := check(m); err != nil {
				return fmt.Errorf("%s: message %d (%s): %w", stream, n, m.Subject(), err)
			}
			n++
		}
		fmt.Printf("%s %d\n", stream, n)
	}
	return nil
}

func check(m jetstream.Msg) error {
	ev, err := subscribe.DecodeJetStream(m)
	if err != nil {
		return err
	}
	// The same message as a core NATS subscription's handler gets it.
	core, err := subscribe.Decode(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
	if err != nil || core.ID != ev.ID || core.Format != ev.Format {
		return fmt.Errorf("Decode of the *nats.Msg: %+v, %v", core, err)
	}
	var o order
	if err := attributevalue.UnmarshalMap(ev.Item, &o); err != nil {
		return fmt.Errorf("item: %w", err)
	}
	var k struct {
		PK string `dynamodbav:"pk"`
		SK int    `dynamodbav:"sk"`
	}
	if err := attributevalue.UnmarshalMap(ev.Keys, &k); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if k.PK != o.PK || k.SK != o.SK || o.PK != fmt.Sprintf("user#%d", o.SK%7) || len(o.N38) != 38 || !o.T || len(o.L) != 3 {
		return fmt.Errorf("item %+v, keys %+v", o, k)
	}
	if ev.Format == "item" {
		return nil // binary and sets arrive as a string and lists
	}
	var l lossless
	if err := attributevalue.UnmarshalMap(ev.Item, &l); err != nil {
		return fmt.Errorf("item: %w", err)
	}
	if len(l.B) != 5 || l.B[4] != byte(o.SK) || len(l.SS) != 3 || len(l.NS) != 3 || len(l.BS) != 2 {
		return fmt.Errorf("item %+v", l)
	}
	if ev.TTLAttribute != "expires" || ev.TTLTime.Unix() != o.Expires || ev.DeletionTime.IsZero() {
		return fmt.Errorf("TTL %q %v, deleted at %v", ev.TTLAttribute, ev.TTLTime, ev.DeletionTime)
	}
	return nil
}
