package testkit

import (
	"strings"

	"github.com/ttl-archiver/archiver/event"
)

// InRegion returns evs as read from the table's replica in region: the
// stream ARN and Region of that Region, event IDs of its own (a stream's
// event IDs are its own), and the same shard IDs, sequence numbers and
// items, which two Regions' streams can share.
func InRegion(region string, evs []event.Event) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		e.StreamARN = strings.Replace(e.StreamARN, ":us-east-1:", ":"+region+":", 1)
		e.Region = event.RegionOf(e.StreamARN)
		e.EventID = region + "-" + e.EventID
		out[i] = e
	}
	return out
}
