package checkpoint

import (
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/event"
)

func TestParseDynamoURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    DynamoURL
		wantErr string // substring of the error; "" = success
	}{
		{in: "dynamodb://leases", want: DynamoURL{Table: "leases"}},
		{in: "dynamodb://archiver.leases_v2-x/", want: DynamoURL{Table: "archiver.leases_v2-x"}},
		{in: "dynamodb://leases?endpoint=http://127.0.0.1:8000&region=eu-west-1&create=true",
			want: DynamoURL{Table: "leases", Endpoint: "http://127.0.0.1:8000", Region: "eu-west-1", Create: true}},
		{in: "dynamodb://leases?create=false", want: DynamoURL{Table: "leases"}},
		{in: "dynamodb://leases?create=1", want: DynamoURL{Table: "leases", Create: true}},
		{in: "file:///tmp/x", wantErr: "scheme"},
		{in: "dynamodb:leases", wantErr: "want dynamodb://TABLE"},
		{in: "dynamodb://", wantErr: "table"},
		{in: "dynamodb://ab", wantErr: "3 to 255"},
		{in: "dynamodb://" + strings.Repeat("a", 256), wantErr: "3 to 255"},
		{in: "dynamodb://lea%20ses", wantErr: "url"},
		{in: "dynamodb://lea$es", wantErr: "table"},
		{in: "dynamodb://leases/extra", wantErr: "path"},
		{in: "dynamodb://leases:80", wantErr: "port"},
		{in: "dynamodb://u:p@leases", wantErr: "user"},
		{in: "dynamodb://leases#frag", wantErr: "fragment"},
		{in: "dynamodb://leases?create=yes", wantErr: "parameter create"},
		{in: "dynamodb://leases?endpoint=localhost:8000", wantErr: "parameter endpoint"},
		{in: "dynamodb://leases?endpoint=ftp://h", wantErr: "parameter endpoint"},
		{in: "dynamodb://leases?region=EU_WEST", wantErr: "parameter region"},
		{in: "dynamodb://leases?region=", wantErr: "parameter region"},
		{in: "dynamodb://leases?create=true&create=false", wantErr: "create given 2 times"},
		{in: "dynamodb://leases?tabel=x", wantErr: `unknown parameter "tabel"`},
		{in: "dynamodb://leases?regoin=eu-west-1", wantErr: `unknown parameter "regoin"; did you mean region?`},
		{in: "dynamodb://leases?zz=1&create=maybe&aa=2", wantErr: `unknown parameter "aa"`}, // the first in order
		{in: "dynamodb://leases?region=1eu", wantErr: "parameter region"},
		{in: "dynamodb://leases?region=eu.west", wantErr: "parameter region"},
		{in: "dynamodb://leases?a=%zz", wantErr: "query"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDynamoURL(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.wantErr)) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseDynamoURL(f *testing.F) {
	for _, s := range []string{"dynamodb://leases", "dynamodb://t12?endpoint=http://127.0.0.1:1&region=us-east-1&create=true",
		"dynamodb://x?create=maybe", "dynamodb://%", "dynamodb:///", "://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDynamoURL(s)
		if err != nil {
			if !strings.Contains(err.Error(), "checkpoint URL") {
				t.Fatalf("error %q does not say what it is about", err)
			}
			return
		}
		if event.ValidTableName(d.Table) != nil {
			t.Fatalf("accepted table %q", d.Table)
		}
	})
}
