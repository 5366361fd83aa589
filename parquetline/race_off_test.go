//go:build !race

package parquetline_test

const raceEnabled = false
