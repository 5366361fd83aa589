package shard

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestGlobalTableFromDescription(t *testing.T) {
	tests := []struct {
		name   string
		desc   ddbtypes.TableDescription
		region string
		want   GlobalTable
	}{
		{"plain table", ddbtypes.TableDescription{}, "us-east-1", GlobalTable{}},
		{"replicas without the own region", ddbtypes.TableDescription{GlobalTableVersion: aws.String("2019.11.21"),
			Replicas: []ddbtypes.ReplicaDescription{{RegionName: aws.String("eu-west-1")}}}, "us-east-1",
			GlobalTable{Version: "2019.11.21", Regions: []string{"eu-west-1", "us-east-1"}}},
		{"replicas with the own region, twice", ddbtypes.TableDescription{GlobalTableVersion: aws.String("2019.11.21"),
			Replicas: []ddbtypes.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("ap-south-1")}, {RegionName: aws.String("ap-south-1")}}},
			"us-east-1", GlobalTable{Version: "2019.11.21", Regions: []string{"ap-south-1", "us-east-1"}}},
		{"strong", ddbtypes.TableDescription{MultiRegionConsistency: ddbtypes.MultiRegionConsistencyStrong,
			Replicas: []ddbtypes.ReplicaDescription{{RegionName: aws.String("us-east-2")}}}, "us-east-1",
			GlobalTable{Regions: []string{"us-east-1", "us-east-2"}, Strong: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := globalTable(&tc.desc, tc.region)
			if got.Version != tc.want.Version || got.Strong != tc.want.Strong || strings.Join(got.Regions, ",") != strings.Join(tc.want.Regions, ",") {
				t.Fatalf("globalTable = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGlobalCheck(t *testing.T) {
	two := Source{Table: "sessions", Global: GlobalTable{Version: "2019.11.21", Regions: []string{"eu-west-1", "us-east-1"}}}
	strong := Source{Table: "locks", Global: GlobalTable{Regions: []string{"us-east-1", "us-east-2", "us-west-2"}, Strong: true}}
	plain := Source{Table: "carts"}
	us, both := []string{"us-east-1"}, []string{"us-east-1", "eu-west-1"}
	tests := []struct {
		name      string
		c         GlobalCheck
		src       Source
		err       string // a part of the error, "" for none
		warn      string // a part of a Warn line, "" for no Warn line
		info      string // a part of an Info line
		wantsNone bool   // an empty verdict
	}{
		{name: "plain table", c: GlobalCheck{Read: us, WantsExpired: true}, src: plain, wantsNone: true},
		{name: "one region, service", c: GlobalCheck{Read: us, WantsExpired: true}, src: two, warn: "eu-west-1 are NOT archived", info: "replicas in eu-west-1, us-east-1"},
		{name: "one region, per-region", c: GlobalCheck{Read: us, PerRegion: true, WantsExpired: true}, src: two, info: "archived by the archivers there"},
		{name: "every region", c: GlobalCheck{Read: both, WantsExpired: true}, src: two, info: "every replica of sessions is read"},
		{name: "past-ttl one region", c: GlobalCheck{Read: us, PastTTL: true, WantsExpired: true}, src: two, info: "exactly one such archiver"},
		{name: "past-ttl two regions", c: GlobalCheck{Read: both, PastTTL: true, WantsExpired: true}, src: two, err: "archived 2 times"},
		{name: "past-ttl per region", c: GlobalCheck{Read: us, PastTTL: true, PerRegion: true, WantsExpired: true}, src: two, err: "without --per-region"},
		{name: "deleted wanted", c: GlobalCheck{Read: both, WantsExpired: true, WantsDeleted: true}, src: two, warn: "once per Region read"},
		{name: "strong, service", c: GlobalCheck{Read: us, WantsExpired: true}, src: strong, err: "archiver sweep"},
		{name: "strong, past-ttl", c: GlobalCheck{Read: us, PastTTL: true, WantsExpired: true}, src: strong, info: "exactly one such archiver"},
		{name: "strong, no expired wanted", c: GlobalCheck{Read: us, WantsDeleted: true}, src: strong, warn: "once per Region read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.c.Check(tc.src)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Check: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if tc.wantsNone {
				if len(v.Info)+len(v.Warn) != 0 {
					t.Fatalf("Check = %+v, want nothing", v)
				}
				return
			}
			if tc.warn == "" && len(v.Warn) > 0 {
				t.Errorf("Warn = %q, want none", v.Warn)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(v.Warn, "\n"), tc.warn) {
				t.Errorf("Warn = %q, want a line with %q", v.Warn, tc.warn)
			}
			if tc.info != "" && !strings.Contains(strings.Join(v.Info, "\n"), tc.info) {
				t.Errorf("Info = %q, want a line with %q", v.Info, tc.info)
			}
		})
	}
}
