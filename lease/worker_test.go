package lease

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
