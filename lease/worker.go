package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultWorkerID names this worker: the ECS task ID (the last segment of the
// TaskARN from the task metadata endpoint, $ECS_CONTAINER_METADATA_URI_V4)
// when running on ECS, else "HOSTNAME-PID".
func DefaultWorkerID(ctx context.Context) string {
	// Its own client, not http.DefaultClient: the metadata endpoint is
	// link-local, never behind the HTTP_PROXY a task may set for the rest.
	direct := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if id, err := ecsTaskID(ctx, os.Getenv("ECS_CONTAINER_METADATA_URI_V4"), direct); err == nil {
		return id
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// ecsTaskID reads the task ID from the ECS task metadata endpoint v4.
func ecsTaskID(ctx context.Context, base string, client *http.Client) (string, error) {
	if base == "" {
		return "", errors.New("not on ECS: ECS_CONTAINER_METADATA_URI_V4 is not set")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/task", nil)
	if err != nil {
		return "", fmt.Errorf("ECS metadata: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("ECS metadata: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("ECS metadata: %s", resp.Status)
	}
	var meta struct {
		TaskARN string `json:"TaskARN"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&meta); err != nil {
		return "", fmt.Errorf("ECS metadata: decode task: %w", err)
	}
	i := strings.LastIndexByte(meta.TaskARN, '/')
	if meta.TaskARN == "" || i == len(meta.TaskARN)-1 {
		return "", fmt.Errorf("ECS metadata: TaskARN %q has no task ID", meta.TaskARN)
	}
	return meta.TaskARN[i+1:], nil
}
