package sweep_test

import (
	"fmt"
	"time"

	"github.com/ttl-archiver/archiver/sweep"
)

// A writer files each item in the window of its TTL.
func ExampleWindow() {
	ttl := time.Date(2022, 7, 19, 21, 27, 31, 0, time.UTC)
	fmt.Println(sweep.Window(ttl, time.Minute, 1))
	fmt.Println(sweep.Window(ttl, 5*time.Minute, 1))

	// A hot table spreads each window over 8 index partitions.
	span, _ := sweep.ParseWindow(sweep.Window(ttl, time.Minute, 8))
	fmt.Println(span.Start, span.End, span.Shard >= 0 && span.Shard < 8)
	// Output:
	// 2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z
	// 2022-07-19T21:25:00.000Z_2022-07-19T21:30:00.000Z
	// 2022-07-19 21:27:00 +0000 UTC 2022-07-19 21:28:00 +0000 UTC true
}
