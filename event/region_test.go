package event

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestRegionOf(t *testing.T) {
	for _, tc := range []struct{ arn, want string }{
		{"arn:aws:dynamodb:us-east-1:123456789012:table/T/stream/2026-01-01T00:00:00.000", "us-east-1"},
		{"arn:aws-us-gov:dynamodb:us-gov-west-1:123456789012:table/T/stream/L", "us-gov-west-1"},
		{"arn:aws-cn:dynamodb:cn-north-1:123456789012:table/T", "cn-north-1"},
		{"arn:aws:dynamodb:ddblocal:000000000000:table/T/stream/L", "ddblocal"},
		{"arn:aws:dynamodb::123456789012:table/T", ""},                     // no Region
		{"arn:aws:dynamodb:US-EAST-1:1:table/T", ""},                       // not lower case
		{"arn:aws:dynamodb:us.east:1:table/T", ""},                         // a dot
		{"arn:aws:dynamodb:1us:1:table/T", ""},                             // starts with a digit
		{"arn:aws:dynamodb:us-east-1", ""},                                 // nothing after the Region
		{"arn:aws:dynamodb", ""},                                           // too short
		{"table/T/stream/L", ""},                                           // not an ARN
		{"arn", ""},                                                        //
		{"", ""},                                                           //
		{"arn:aws:dynamodb:" + strings.Repeat("a", 33) + ":1:table/T", ""}, // too long
	} {
		if got := RegionOf(tc.arn); got != tc.want {
			t.Errorf("RegionOf(%q) = %q, want %q", tc.arn, got, tc.want)
		}
	}
	arn := "arn:aws:dynamodb:eu-west-1:123456789012:table/T/stream/L"
	if n := testing.AllocsPerRun(100, func() { _ = RegionOf(arn) }); n != 0 {
		t.Errorf("RegionOf allocates %v times", n)
	}
}

// TestDecodeRegion: a decoded record's Region is its stream ARN's.
func TestDecodeRegion(t *testing.T) {
	r := rec(types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), "000123")
	for arn, want := range map[string]string{
		"arn:aws:dynamodb:eu-central-1:123456789012:table/tbl/stream/2026-01-01T00:00:00.000": "eu-central-1",
		"arn:s": "",
	} {
		e, err := Decode("tbl", arn, "shard-1", r, "expires")
		if err != nil {
			t.Fatal(err)
		}
		if e.Region != want {
			t.Errorf("%s: Region %q, want %q", arn, e.Region, want)
		}
	}
}

// TestLineRegion: a line names its Region after streamArn; a line
// without one (written before lines named it) takes its streamArn's; the
// line's own region stands over its streamArn's.
func TestLineRegion(t *testing.T) {
	e := sampleEvent()
	e.StreamARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/L"
	e.Region = "eu-west-1"
	line := string(MarshalLine(&e))
	if !strings.Contains(line, `"streamArn":"`+e.StreamARN+`","region":"eu-west-1",`) {
		t.Fatalf("no region after streamArn: %s", line)
	}
	for _, tc := range []struct{ name, line, want string }{
		{"written", line, "eu-west-1"},
		{"old line", strings.Replace(line, `,"region":"eu-west-1"`, "", 1), "eu-west-1"},
		{"old line, no ARN", strings.Replace(strings.Replace(line, `,"region":"eu-west-1"`, "", 1), e.StreamARN, "", 1), ""},
		{"the line's own", strings.Replace(line, `"region":"eu-west-1"`, `"region":"ap-south-1"`, 1), "ap-south-1"},
	} {
		got, err := DecodeLine([]byte(tc.line))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Region != tc.want {
			t.Errorf("%s: Region %q, want %q", tc.name, got.Region, tc.want)
		}
	}
	e.Region = ""
	if l := string(MarshalLine(&e)); strings.Contains(l, `"region"`) {
		t.Errorf("an event without a Region names one: %s", l)
	}
}
