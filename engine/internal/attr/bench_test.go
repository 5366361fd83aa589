package attr

import (
	"encoding/json"
	"testing"
)

const benchItem = `{"pk":{"S":"user#12345"},"sk":{"N":"1700000000"},"name":{"S":"Alice Example"},` +
	`"expires":{"N":"1700003600.5"},"tags":{"SS":["a","b","c"]},"profile":{"M":{"age":{"N":"42"},"city":{"S":"Paris"}}}}`

func BenchmarkUnmarshalItemJSON(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := UnmarshalItemJSON([]byte(benchItem)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingJSONItem(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var it map[string]Value
		if err := json.Unmarshal([]byte(benchItem), &it); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendItemJSON(b *testing.B) {
	it, _ := UnmarshalItemJSON([]byte(benchItem))
	b.ReportAllocs()
	buf := make([]byte, 0, 512)
	for i := 0; i < b.N; i++ {
		buf = AppendItemJSON(buf[:0], it)
	}
}

func BenchmarkCompareNumbers(b *testing.B) {
	x, y := MustNum("1700000000.25"), MustNum("1700000000.5")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Compare(x, y)
	}
}

func BenchmarkItemSize(b *testing.B) {
	it, _ := UnmarshalItemJSON([]byte(benchItem))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ItemSize(it)
	}
}
