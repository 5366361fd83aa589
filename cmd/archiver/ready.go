package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/ttl-archiver/archiver/internal/ops"
	"github.com/ttl-archiver/archiver/sinks"
)

// sinksCheck is the "sinks connected" readiness check. A sink that
// implements ops.Readier answers for itself. A nats:// sink that does not is
// probed from the outside: at least one of its servers must accept a TCP
// connection. Other sinks count as ready.
func sinksCheck(opened []sinks.Sink, urls []string) ops.Check {
	self := ops.ReadyCheck(opened...)
	var natsServers [][]string
	for i, s := range opened {
		if _, ok := s.(ops.Readier); ok || i >= len(urls) {
			continue
		}
		if hosts := natsHosts(urls[i]); len(hosts) > 0 {
			natsServers = append(natsServers, hosts)
		}
	}
	return func(ctx context.Context) error {
		errs := []error{self(ctx)}
		for _, hosts := range natsServers {
			errs = append(errs, dialAny(ctx, hosts))
		}
		return errors.Join(errs...)
	}
}

// natsHosts returns the host:port list of a nats:// sink URL
// (nats://[cred@]h1:p1,h2:p2?...); nil for other schemes.
func natsHosts(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "nats" {
		return nil
	}
	var out []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "4222")
		}
		out = append(out, h)
	}
	return out
}

func dialAny(ctx context.Context, hosts []string) error {
	var d net.Dialer
	var errs []error
	for _, h := range hosts {
		c, err := d.DialContext(ctx, "tcp", h)
		if err == nil {
			_ = c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("nats sink: no server reachable: %w", errors.Join(errs...))
}
