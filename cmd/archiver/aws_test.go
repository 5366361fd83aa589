package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// isolateAWS clears every way the SDK could find a region or credentials.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("HOME", dir)
}

func TestLoadAWSConfig(t *testing.T) {
	isolateAWS(t)
	ctx := context.Background()
	t.Run("loopback endpoint without credentials signs with placeholders", func(t *testing.T) {
		cfg, err := loadAWSConfig(ctx, "run", "", "http://127.0.0.1:8000", zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		creds, err := cfg.Credentials.Retrieve(ctx)
		if err != nil || creds.AccessKeyID != "local" || cfg.Region != "us-east-1" {
			t.Fatalf("creds %+v err %v region %q", creds, err, cfg.Region)
		}
		// Every SDK client made from it sends through sdkhttp (Client
		// returns a client it already wrapped unchanged).
		if sdkhttp.Client(cfg.HTTPClient) != cfg.HTTPClient {
			t.Fatalf("HTTP client %T is not sdkhttp's", cfg.HTTPClient)
		}
	})
	t.Run("loopback endpoint keeps configured credentials", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIAREAL")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
		cfg, err := loadAWSConfig(ctx, "run", "eu-west-1", "http://localhost:8000", zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		creds, err := cfg.Credentials.Retrieve(ctx)
		if err != nil || creds.AccessKeyID != "AKIAREAL" || cfg.Region != "eu-west-1" {
			t.Fatalf("creds %+v err %v region %q", creds, err, cfg.Region)
		}
	})
	t.Run("AWS without a region is a usage error", func(t *testing.T) {
		_, err := loadAWSConfig(ctx, "run", "", "", zap.NewNop())
		var ue *cli.UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want a usage error naming --region", err)
		}
	})
}
