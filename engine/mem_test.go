package engine_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine"
)

// The engine's live heap per stored item: the items make bench's
// engine-mem section writes (a pk+sk table, BatchWriteItem of 25), with
// and without a stream, reported as live-B/item (the heap after a
// collection, over the heap before the items). Set ENGINE_MEM_PROFILE to a
// path to write the heap profile with the items stored.

const memBenchItems = 50_000

func BenchmarkStoredItemMemory(b *testing.B) {
	for _, c := range []struct {
		name    string
		payload int
		stream  bool
	}{{"100B", 100, false}, {"250B-stream", 250, true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				memLoad(b, c.payload, c.stream)
			}
		})
	}
}

func memLoad(b *testing.B, payload int, stream bool) {
	eng, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	r, body, w := benchRequest(), bytes.NewReader(nil), &nullWriter{h: http.Header{}}
	spec := ""
	if stream {
		spec = `,"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"}`
	}
	benchReq{"DynamoDB_20120810.CreateTable", `{"TableName":"cpu","BillingMode":"PAY_PER_REQUEST",` +
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],` +
		`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"}]` + spec + `}`}.serve(b, eng, r, body, w)
	before := liveHeap()
	cpu0 := cpuTime()
	pad := strings.Repeat("x", payload)
	var q strings.Builder
	for base := 0; base < memBenchItems; base += 25 {
		q.Reset()
		q.WriteString(`{"RequestItems":{"cpu":[`)
		for k := base; k < base+25; k++ {
			if k > base {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, `{"PutRequest":{"Item":{"pk":{"S":"p%d"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"}}}}`, k%1000, k, pad, k*7)
		}
		q.WriteString("]}}")
		benchReq{"DynamoDB_20120810.BatchWriteItem", q.String()}.serve(b, eng, r, body, w)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/memBenchItems, "cpu-ns/item")
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.Logf("before GC: HeapInuse %d HeapIdle %d HeapReleased %d Sys %d HeapAlloc %d StackInuse %d NumGC %d", m.HeapInuse>>20, m.HeapIdle>>20, m.HeapReleased>>20, m.Sys>>20, m.HeapAlloc>>20, m.StackInuse>>20, m.NumGC)
	after := liveHeap()
	b.ReportMetric(float64(after-before)/memBenchItems, "live-B/item")
	if p := os.Getenv("ENGINE_MEM_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(eng)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
