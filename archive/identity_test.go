package archive

import (
	"fmt"
	"testing"

	"github.com/ttl-archiver/archiver/event"
)

// TestIdentitySet: 32 lowercase hex digits take the 16-byte form, every
// other event ID (and a dead letter's identity) the string form; each
// identity is new once, through the table's growth and after a reset.
func TestIdentitySet(t *testing.T) {
	var set identitySet
	var ids []identity
	x := event.NewIDHasher()
	for i := range 5000 {
		ids = append(ids, newIdentity(&event.Event{EventID: fmt.Sprintf("%032x", i)}, x))
	}
	for _, e := range []event.Event{
		{EventID: "0123456789ABCDEF0123456789abcdef"}, // upper case
		{EventID: "0123456789abcdef0123456789abcde"},  // 31 digits
		{EventID: "0123456789abcdef0123456789abcdeg"},
		{EventID: "0123456789abcdef0123456789abcdef", DeadLetter: &event.DeadLetter{Sink: "s3://b"}},
		{EventID: "0123456789abcdef0123456789abcdef"},
	} {
		ids = append(ids, newIdentity(&e, x))
	}
	for i, id := range ids {
		if wantHex := i < 5000 || i == len(ids)-1; (id.kind == idHex) != wantHex || id.none() {
			t.Fatalf("identity %d = %+v", i, id)
		}
	}
	for round := range 2 {
		for i := range ids {
			if !set.add(&ids[i]) {
				t.Fatalf("round %d: %+v not new", round, ids[i])
			}
		}
		for i := range ids {
			if set.add(&ids[i]) {
				t.Fatalf("round %d: %+v new again", round, ids[i])
			}
		}
		set.reset()
	}
	if id := newIdentity(&event.Event{}, x); !id.none() {
		t.Errorf("no event ID: %+v", id)
	}
}
