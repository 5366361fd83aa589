package checkpoint

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
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
		if validTableName(d.Table) != nil {
			t.Fatalf("accepted table %q", d.Table)
		}
	})
}

func TestECSTaskID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v4/good/task":
			fmt.Fprint(w, `{"Cluster":"c","TaskARN":"arn:aws:ecs:eu-west-1:123456789012:task/archiver/0a1b2c3d4e5f"}`)
		case "/v4/empty/task":
			fmt.Fprint(w, `{"TaskARN":""}`)
		case "/v4/junk/task":
			fmt.Fprint(w, `not json`)
		case "/v4/slow/task":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct{ base, want, wantErr string }{
		{srv.URL + "/v4/good", "0a1b2c3d4e5f", ""},
		{srv.URL + "/v4/good/", "0a1b2c3d4e5f", ""},
		{srv.URL + "/v4/empty", "", "no task ID"},
		{srv.URL + "/v4/junk", "", "decode"},
		{srv.URL + "/v4/missing", "", "404"},
		{srv.URL + "/v4/slow", "", "deadline"},
		{"", "", "not on ECS"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			got, err := ecsTaskID(context.Background(), tc.base, srv.Client())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestDefaultWorkerID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"TaskARN":"arn:aws:ecs:us-east-1:1:task/c/abc123"}`)
	}))
	defer srv.Close()
	t.Setenv("ECS_CONTAINER_METADATA_URI_V4", srv.URL)
	if got := DefaultWorkerID(context.Background()); got != "abc123" {
		t.Errorf("on ECS: %q, want abc123", got)
	}
	t.Setenv("ECS_CONTAINER_METADATA_URI_V4", "")
	host, _ := os.Hostname()
	if got, want := DefaultWorkerID(context.Background()), host+"-"+strconv.Itoa(os.Getpid()); got != want {
		t.Errorf("off ECS: %q, want %q", got, want)
	}
}
