package manifest

import (
	"fmt"
	"net/url"
	"strings"
)

// seqDigits is the width sequence numbers are padded to in a manifest's
// name, so that names sort as their To does (event.ValidSequence allows up
// to 64 digits; DynamoDB Streams' have up to 40).
const seqDigits = 64

// ShardDir is the folder of one shard's manifests, relative to the
// archive's root:
//
//	_manifests/table=T/region=R/stream=LABEL/shard=ID/
//
// (region= is "_" for a stream ARN without one). Names are path-escaped
// (url.PathEscape), so no table, label or shard ID can reach outside the
// folder. A shard's manifests list together, the newest last.
func ShardDir(table, region, streamARN, shardID string) string {
	return fmt.Sprintf("%stable=%s/region=%s/stream=%s/shard=%s/", Dir,
		url.PathEscape(table), url.PathEscape(orUnderscore(region)), url.PathEscape(label(streamARN)), url.PathEscape(shardID))
}

// Key is where m is stored, relative to the archive's root: its shard's
// folder and To, zero-padded so that names sort by To, e.g.
//
//	_manifests/table=sessions/region=eu-west-1/stream=2026-11-01T00:00:00.000/shard=shardId-0001/000…0042.json
//
// A second manifest of the same range with other content (a range
// recorded again after a crash, its objects listed anew) is stored beside
// it under [ConflictKey].
func Key(m Manifest) string {
	return ShardDir(m.Table, m.Region, m.Stream, m.Shard) + pad(m.To) + ".json"
}

// ConflictKey is Key with the first 12 hex digits of the manifest's digest
// before the extension: where a different manifest of the same range goes.
func ConflictKey(m Manifest, digest string) string {
	return ShardDir(m.Table, m.Region, m.Stream, m.Shard) + pad(m.To) + "." + digest[:12] + ".json"
}

// EndingAt is the prefix of the keys of every manifest of a shard whose
// range ends at to: [Key]'s and each [ConflictKey]'s, relative to the
// archive's root. A recorder lists it to find the manifest its next range
// follows.
func EndingAt(table, region, streamARN, shardID, to string) string {
	return ShardDir(table, region, streamARN, shardID) + pad(to) + "."
}

// IsKey reports whether key (relative to the archive's root) is under Dir
// and names a manifest (a .json file).
func IsKey(key string) bool {
	return strings.HasPrefix(key, Dir) && strings.HasSuffix(key, ".json")
}

func pad(seq string) string {
	if len(seq) >= seqDigits {
		return seq
	}
	return strings.Repeat("0", seqDigits-len(seq)) + seq
}

// label is a stream ARN's label (the part after /stream/), or the whole
// ARN when it has none.
func label(arn string) string {
	if i := strings.LastIndex(arn, "/stream/"); i >= 0 {
		return arn[i+len("/stream/"):]
	}
	return arn
}

func orUnderscore(s string) string {
	if s == "" {
		return "_"
	}
	return s
}
