package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// Digest is what the reader computed of one object's stored bytes (as
// downloaded, before decompression), for [Options.OnObject].
type Digest struct {
	// Size is the number of bytes read.
	Size int64
	// SHA256 is the hex SHA-256 of those bytes ("" when
	// Options.HashObject did not ask for it).
	SHA256 string
	// Prefixes maps each length Options.HashObject asked for that is
	// shorter than Size to the hex SHA-256 of the object's first that
	// many bytes (nil when none was).
	Prefixes map[int64]string
}

// digestOf hashes body in one pass, taking the digest of each prefix
// asked for on the way.
func digestOf(body []byte, prefixes []int64) Digest {
	d := Digest{Size: int64(len(body))}
	h := sha256.New()
	var done int64
	for _, n := range slices.Compact(slices.Sorted(slices.Values(prefixes))) {
		if n < done || n >= d.Size {
			continue
		}
		h.Write(body[done:n])
		done = n
		if d.Prefixes == nil {
			d.Prefixes = map[int64]string{}
		}
		d.Prefixes[n] = hex.EncodeToString(h.Sum(nil))
	}
	h.Write(body[done:])
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
	return d
}
