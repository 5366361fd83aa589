package parquetline

import (
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// codecWindow is the zstd window of the pages written. A page is
// compressed alone and is smaller than this (parquet-go writes pages of
// at most 256 KiB by default), so a larger window finds nothing more; the
// default window (8 MiB) made every new encoder allocate 16 MiB of
// history, which with parquet-go's own codec (encoders in a pool the
// collector empties) was most of a file's CPU.
const codecWindow = 512 << 10

// codecPool bounds the encoders and decoders a codec keeps.
const codecPool = 4

// codec is zstd at the default level for parquet-go, keeping its encoders
// and decoders for every file of one [Encoder] (a sink's lifetime) instead
// of in a pool the collector empties.
type codec struct {
	enc chan *zstd.Encoder
	dec chan *zstd.Decoder
}

func newCodec() *codec {
	return &codec{enc: make(chan *zstd.Encoder, codecPool), dec: make(chan *zstd.Decoder, codecPool)}
}

func (c *codec) String() string { return "ZSTD" }

func (c *codec) CompressionCodec() format.CompressionCodec { return format.Zstd }

// Encode compresses one page into dst.
func (c *codec) Encode(dst, src []byte) ([]byte, error) {
	var e *zstd.Encoder
	select {
	case e = <-c.enc:
	default:
		var err error
		e, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithWindowSize(codecWindow), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, err
		}
	}
	out := e.EncodeAll(src, dst[:0])
	select {
	case c.enc <- e:
	default:
	}
	return out, nil
}

// Decode decompresses one page into dst.
func (c *codec) Decode(dst, src []byte) ([]byte, error) {
	var d *zstd.Decoder
	select {
	case d = <-c.dec:
	default:
		var err error
		if d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
			return nil, err
		}
	}
	out, err := d.DecodeAll(src, dst[:0])
	select {
	case c.dec <- d:
	default:
		d.Close()
	}
	return out, err
}
