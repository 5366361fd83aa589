// Command nullserver is the ceiling of the engine bench's server-CPU
// figures: a bare net/http server, configured as engine.Listen configures
// the engine's, that reads each request body and answers {} with no work at
// all. The bench runs it as its own process under the same load as the
// engine, so what it costs per request is what net/http itself costs.
//
// Usage: nullserver ADDR (e.g. 127.0.0.1:8001). It runs until killed.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nullserver HOST:PORT")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nullserver:", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.HandlerFunc(answerEmpty), ReadHeaderTimeout: 30 * time.Second}
	fmt.Fprintln(os.Stderr, "nullserver:", srv.Serve(ln))
	os.Exit(1)
}

// answerEmpty reads the request and answers an empty JSON object with the
// headers a DynamoDB client expects.
func answerEmpty(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("Content-Length", "2")
	_, _ = io.WriteString(w, "{}")
}
