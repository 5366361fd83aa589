package archive_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// Read back what a file sink archived: the URL is the sink's.
func ExampleArchive_Events() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "archive-example")
	defer os.RemoveAll(dir)

	// Archive three expiries, the last one twice (a re-delivered tail).
	sk, _, _ := sinks.Open(ctx, "file://"+dir, sinks.Options{})
	evs := events("Sessions", "shard-1", event.Expired, 0, 3, 0)
	done := make(chan error, 2)
	_ = sk.Write(ctx, sinks.Batch{ShardID: "shard-1", Events: evs}, func(err error) { done <- err })
	_ = sk.Write(ctx, sinks.Batch{ShardID: "shard-1", Events: evs[2:]}, func(err error) { done <- err })
	<-done
	<-done
	_ = sk.Close(ctx)

	a, err := archive.Open(ctx, "file://"+dir, archive.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := a.Events(ctx, archive.Selection{Tables: []string{"Sessions"}, Kinds: []event.Kind{event.Expired}},
		func(l archive.Line) error {
			fmt.Printf("%s line %d: %s %s\n", l.Object, l.Line, l.Event.EventID, event.PlainJSON(l.Event.Keys))
			return nil
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d events, %d duplicates\n", st.Events, st.Duplicates)
	// Output:
	// Sessions/2026-03-04/05.jsonl line 1: Sessions-shard-1-0 {"pk":"item-0"}
	// Sessions/2026-03-04/05.jsonl line 2: Sessions-shard-1-1 {"pk":"item-1"}
	// Sessions/2026-03-04/05.jsonl line 3: Sessions-shard-1-2 {"pk":"item-2"}
	// 3 events, 1 duplicates
}
