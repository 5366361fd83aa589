package sinkapi

import (
	"testing"

	"github.com/ttl-archiver/archiver/sinkurl"
)

func TestOptionsManifests(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		in   sinkurl.ManifestConfig
		want sinkurl.ManifestConfig
	}{
		{"defaults", Options{}, sinkurl.ManifestConfig{}, sinkurl.ManifestConfig{}},
		{"worker named", Options{Worker: "task-1"}, sinkurl.ManifestConfig{Objects: 5}, sinkurl.ManifestConfig{Objects: 5, Writer: "task-1"}},
		{"config's writer kept", Options{Worker: "task-1"}, sinkurl.ManifestConfig{Writer: "w"}, sinkurl.ManifestConfig{Writer: "w"}},
		{"NoManifests", Options{NoManifests: true}, sinkurl.ManifestConfig{}, sinkurl.ManifestConfig{Off: true}},
		{"manifests=false kept", Options{}, sinkurl.ManifestConfig{Off: true}, sinkurl.ManifestConfig{Off: true}},
	} {
		if got := tc.o.Manifests(tc.in); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
