package subscribe_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/subscribe"
)

// A downstream service reads expiries from the stream the archiver
// publishes into with a durable JetStream consumer: after a restart it
// goes on where it stopped, and it acknowledges a message only once it has
// handled it. It de-duplicates on ev.ID (every copy of an event has the
// same one) and would unmarshal the item into its own type with
// attributevalue.UnmarshalMap(ev.Item, &order).
func Example_jetStream() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "ARCHIVER", jetstream.ConsumerConfig{
		Durable:       "billing",
		FilterSubject: "archiver.orders.expired",
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	if err != nil {
		log.Fatal(err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		ev, err := subscribe.DecodeJetStream(msg)
		if err != nil {
			log.Printf("unreadable message %s: %v", msg.Subject(), err)
			_ = msg.Term() // never redelivered; keep it elsewhere if it matters
			return
		}
		log.Printf("%s: %s expired at %s (%s after its TTL), deleted by %s",
			ev.Table, ev.ID, ev.DeletionTime, ev.TTLLag, ev.DeletedBy)
		_ = msg.Ack()
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	<-ctx.Done()
}
