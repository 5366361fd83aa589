package cli

import (
	"net"
	"regexp"
	"strings"
)

// regionRE is the form of an AWS Region's name: us-east-1, ap-southeast-2,
// us-gov-west-1.
var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// IsRegion reports whether s has the form of a Region's name
// ("us-east-1"), the check of every --region flag.
func IsRegion(s string) bool { return regionRE.MatchString(s) }

// IsLoopbackHost reports whether host (a name or an IP, from a URL or a
// listen address, IPv6 with or without brackets) is this machine's
// loopback.
func IsLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
