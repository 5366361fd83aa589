package stream

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"time"
)

// A shard iterator is "<stream ARN>|1|<base64url payload>", like AWS's.
// The payload holds the stream and shard ordinals, the position (the
// lowest sequence number still to read; 0 means the trim horizon), the
// issue time by the engine clock and the registry's expiry epoch, followed
// by a truncated HMAC over the ARN and the payload with a key private to
// the registry, so a garbled or forged iterator is rejected, never
// misread.

type iterator struct {
	arn      string
	streamID uint32
	shardID  uint32
	pos      uint64
	issued   int64 // unix nanos
	epoch    uint32
}

const (
	iterVersion    = 1
	iterPayloadLen = 1 + 4 + 4 + 8 + 8 + 4
	iterMACLen     = 12
)

func (r *Registry) encodeIterator(it iterator) string {
	var p [iterPayloadLen + iterMACLen]byte
	p[0] = iterVersion
	binary.BigEndian.PutUint32(p[1:], it.streamID)
	binary.BigEndian.PutUint32(p[5:], it.shardID)
	binary.BigEndian.PutUint64(p[9:], it.pos)
	binary.BigEndian.PutUint64(p[17:], uint64(it.issued))
	binary.BigEndian.PutUint32(p[25:], it.epoch)
	copy(p[iterPayloadLen:], r.iterMAC(it.arn, p[:iterPayloadLen]))
	return it.arn + "|1|" + base64.RawURLEncoding.EncodeToString(p[:])
}

func (r *Registry) iterMAC(arn string, payload []byte) []byte {
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(arn))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:iterMACLen]
}

// decodeIterator parses and authenticates an iterator; ok is false for
// anything this registry did not issue.
func (r *Registry) decodeIterator(s string) (it iterator, ok bool) {
	i := strings.LastIndexByte(s, '|')
	if i < 2 || s[i-2:i] != "|1" {
		return it, false
	}
	arn := s[:i-2]
	p, err := base64.RawURLEncoding.DecodeString(s[i+1:])
	if err != nil || len(p) != iterPayloadLen+iterMACLen || p[0] != iterVersion {
		return it, false
	}
	if !hmac.Equal(p[iterPayloadLen:], r.iterMAC(arn, p[:iterPayloadLen])) {
		return it, false
	}
	return iterator{
		arn:      arn,
		streamID: binary.BigEndian.Uint32(p[1:]),
		shardID:  binary.BigEndian.Uint32(p[5:]),
		pos:      binary.BigEndian.Uint64(p[9:]),
		issued:   int64(binary.BigEndian.Uint64(p[17:])),
		epoch:    binary.BigEndian.Uint32(p[25:]),
	}, true
}

// expired reports whether the iterator is past its lifetime or from an
// expired epoch.
func (r *Registry) expired(it iterator, now time.Time) bool {
	return it.epoch != r.epoch.Load() || now.UnixNano()-it.issued > int64(IteratorLifetime)
}
