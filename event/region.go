package event

import "strings"

// maxRegion bounds a Region's length; AWS's longest are about half that.
const maxRegion = 32

// RegionOf returns the AWS Region an ARN names, such as a stream's
// (arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL): its
// fourth field, when [ValidRegion] holds for it, else "". It is a
// substring of arn: nothing is allocated.
//
// The Region of a record is the Region of the stream it was read from:
// in a global table every replica's stream has the replica's Region in
// its ARN.
func RegionOf(arn string) string {
	rest, ok := strings.CutPrefix(arn, "arn:")
	if !ok {
		return ""
	}
	for range 2 { // partition, service
		i := strings.IndexByte(rest, ':')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
	}
	i := strings.IndexByte(rest, ':')
	if i < 0 || !ValidRegion(rest[:i]) {
		return ""
	}
	return rest[:i]
}

// ValidRegion reports whether s has the form of an AWS Region name
// (us-east-1, eu-isoe-west-1, a local engine's "ddblocal"): a lower-case
// letter, then lower-case letters, digits and hyphens, at most 32 bytes.
// Such a name needs no escaping in an S3 key, a file name, a NATS header
// or a subject token, and holds no '.', which the S3 sink's object names
// use as a separator.
func ValidRegion(s string) bool {
	if s == "" || len(s) > maxRegion || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
