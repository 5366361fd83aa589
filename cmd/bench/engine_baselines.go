package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
)

// The baselines of the engine sections: other local DynamoDB servers
// (moto, dynalite, Dynoxide) and a server that does nothing.

func startMoto(port int) (*exec.Cmd, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, errors.New("python3 not installed")
	}
	if err := exec.Command(py, "-c", "import moto.server").Run(); err != nil {
		return nil, errors.New("moto not installed")
	}
	return exec.Command(py, "-m", "moto.server", "-H", "127.0.0.1", "-p", strconv.Itoa(port)), nil
}

// sdkCeiling runs the PutItem load through the same SDK client settings
// against a net/http server that reads each request and answers "{}" with
// no work at all: the most any Go HTTP server can reach with this client on
// this machine, since client and server share its cores.
func sdkCeiling(ctx context.Context, phase time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte("{}"))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	db, _ := benchkit.PooledClients("http://" + ln.Addr().String())
	rate, _, err := putLoad(ctx, db, "bench", phase)
	return rate, err
}

// npmDir is where the bench installs an npm package it runs (dynalite,
// Dynoxide) when it is not installed already, so that later runs reuse it.
func npmDir(name string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "ttl-archiver-bench", name)
}

// npmInstalled returns the path of file (relative to node_modules) in the
// bench's own install of pkg, installing pkg with npm first when the file
// is missing and install is set. It returns "" when npm is missing or the install failed: the
// caller then looks elsewhere or reports the baseline as not installed.
func npmInstalled(dir, pkg, file string, install bool) string {
	path := filepath.Join(npmDir(dir), "node_modules", file)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	npm, err := exec.LookPath("npm")
	if err != nil || !install {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if exec.CommandContext(ctx, npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", npmDir(dir), pkg).Run() != nil {
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// dynalite returns the command of dynalite on a port, installing it first
// when it is missing and install is set.
func dynalite(install bool) func(port int) (*exec.Cmd, error) {
	return func(port int) (*exec.Cmd, error) { return startDynalite(port, install) }
}

func startDynalite(port int, install bool) (*exec.Cmd, error) {
	bin := npmInstalled("dynalite", "dynalite", ".bin/dynalite", install)
	for _, p := range []string{"node_modules/.bin/dynalite", filepath.Join(os.Getenv("HOME"), "node_modules/.bin/dynalite")} {
		if _, err := os.Stat(p); bin == "" && err == nil {
			bin = p
		}
	}
	if bin == "" {
		if p, err := exec.LookPath("dynalite"); err == nil {
			bin = p
		}
	}
	if bin == "" {
		return nil, errors.New("dynalite not installed and npm could not install it")
	}
	return exec.Command(bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port)), nil
}

// startDynoxide runs Dynoxide (a DynamoDB Local replacement in Rust, on
// SQLite) in memory. Its binary ships inside the npm package
// @dynoxide/linux-x64, which the bench installs when missing.
func startDynoxide(port int, install bool) (*exec.Cmd, error) {
	bin := npmInstalled("dynoxide", "@dynoxide/linux-x64", "@dynoxide/linux-x64/dynoxide", install)
	if bin == "" {
		p, err := exec.LookPath("dynoxide")
		if err != nil {
			return nil, errors.New("dynoxide not installed and npm could not install @dynoxide/linux-x64")
		}
		bin = p
	}
	return exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port)), nil
}

// baselinePut starts another local DynamoDB on a free loopback port and
// measures the same PutItem load against it.
func baselinePut(ctx context.Context, start func(port int) (*exec.Cmd, error), phase time.Duration) (float64, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return 0, err
	}
	cmd, err := start(port)
	if err != nil {
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start: %w", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	db, _ := benchkit.PooledClients(endpoint)
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := db.ListTables(cctx, &dynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("did not come up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := createBenchTable(ctx, db, "bench", false, false); err != nil {
		return 0, err
	}
	// dynalite creates tables asynchronously, as DynamoDB does.
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("bench")}, 30*time.Second); err != nil {
		return 0, fmt.Errorf("waiting for the table: %w", err)
	}
	rate, _, err := putLoad(ctx, db, "bench", phase)
	return rate, err
}
