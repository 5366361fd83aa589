package shard

import (
	"reflect"
	"strings"
	"sync"
	"testing"
)

// TestFastDecodeRecordsHeldPastTheirBatch: the fast decoder's strings point
// into the response it read instead of a copy. A record held past its
// batch (in flight at a sink) must stay what the SDK decodes from the same
// bytes while later responses are decoded on other goroutines; run under
// -race.
func TestFastDecodeRecordsHeldPastTheirBatch(t *testing.T) {
	fast := fastProtocol{ClientProtocol: sdkProtocol()}
	held, err := decodeWith(fast, []byte(everyShape))
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeWith(sdkProtocol(), []byte(everyShape))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Other responses of the same size and shape, with other bytes.
			body := []byte(strings.NewReplacer("1", "7").Replace(everyShape))
			for range 20 {
				if _, err := decodeWith(fast, body); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if !reflect.DeepEqual(held, want) {
		t.Fatalf("a held record changed after later batches:\nheld: %#v\nsdk:  %#v", held, want)
	}
}
