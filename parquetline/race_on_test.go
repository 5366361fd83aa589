//go:build race

package parquetline_test

// raceEnabled: the race detector turns on checkptr, under which the
// Parquet library's unsafe slicing of some lying offsets is a fatal
// error rather than the panic Lines recovers from.
const raceEnabled = true
