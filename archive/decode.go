package archive

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// decodeDepth is how many downloaded groups are decoded ahead of the one
// being read; chunkLines is the lines in one chunk, and chunkAhead the
// chunks one object's decoder may hold ready. Decoded lines in memory are
// therefore bounded by (decodeDepth + 2) groups × (chunkAhead + 1)
// chunks per object.
const (
	decodeDepth = 2
	chunkLines  = 256
	chunkAhead  = 2
)

// decoded is one line of an object as its decoder saw it: a decoded
// line with its identity, or an error (a line that does not decode, or a
// body that breaks off).
type decoded struct {
	line Line
	id   string
	err  error
	// counted: a line of the body (Stats.Lines); a broken body is not.
	counted bool
}

type chunk []decoded

// decodeAhead passes the downloaded jobs on in order, each once its
// objects' decoders run, so that decoding uses other cores while the
// caller reads the current group. The channel closes when jobs does or
// ctx ends; wait returns once every decoder ended.
func decodeAhead(ctx context.Context, jobs <-chan *job, skipImages bool) (<-chan *job, func()) {
	ready := make(chan *job, decodeDepth)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(ready)
		for j := range jobs {
			select {
			case <-j.done:
			case <-ctx.Done():
				return
			}
			j.dec = make([]chan chunk, len(j.g.objs))
			for i := range j.g.objs {
				ch := make(chan chunk, chunkAhead)
				j.dec[i] = ch
				if j.err != nil {
					close(ch)
					continue
				}
				body, enc := j.bodies[i], j.encs[i]
				j.bodies[i] = nil
				key := j.g.objs[i].Key
				wg.Go(func() { decodeObject(ctx, key, body, enc, skipImages, ch) })
			}
			select {
			case ready <- j:
			case <-ctx.Done():
				return
			}
		}
	})
	return ready, wg.Wait
}

// decodeObject decompresses and decodes one object's lines and sends
// them in chunks, then closes out. A body whose compression is broken is
// one error at the line where it broke.
func decodeObject(ctx context.Context, key string, body []byte, enc string, skipImages bool, out chan<- chunk) {
	defer close(out)
	var c chunk
	send := func() bool {
		if len(c) == 0 {
			return true
		}
		select {
		case out <- c:
			c = make(chunk, 0, chunkLines)
			return true
		case <-ctx.Done():
			return false
		}
	}
	zr, closeFn, err := sinks.Decompress(bytes.NewReader(body), enc, key)
	if err != nil {
		c = append(c, decoded{line: Line{Object: key, Line: 1}, err: err})
		send()
		return
	}
	defer closeFn()
	br := bufio.NewReaderSize(zr, 256<<10)
	names := &interner{}
	var buf []byte
	for n := 1; ; n++ {
		line, tooLong, err := readLine(br, buf[:0])
		buf = line[:0]
		if err == io.EOF && len(line) == 0 && !tooLong {
			break
		}
		if err != nil && err != io.EOF {
			c = append(c, decoded{line: Line{Object: key, Line: n}, err: fmt.Errorf("reading the body: %w", err)})
			break
		}
		if tooLong {
			c = append(c, decoded{line: Line{Object: key, Line: n}, err: fmt.Errorf("line longer than %d bytes", maxLine), counted: true})
		} else if len(bytes.TrimSpace(line)) > 0 {
			c = append(c, decodeLine(key, n, line, names, skipImages))
		}
		if err == io.EOF || (len(c) >= chunkLines && !send()) {
			break
		}
	}
	send()
}

// decodeLine decodes one non-empty line: the fast path, else
// event.DecodeLine, which explains what is wrong. With skipImages the
// event keeps no images (they are checked all the same).
func decodeLine(key string, n int, line []byte, names *interner, skipImages bool) decoded {
	e, ok := fastDecodeLine(line, names, skipImages)
	if !ok {
		var err error
		if e, err = event.DecodeLine(line); err != nil {
			return decoded{line: Line{Object: key, Line: n}, err: err, counted: true}
		}
		if skipImages {
			e.Keys, e.OldImage, e.NewImage = nil, nil, nil
		}
	}
	d := decoded{line: Line{Object: key, Line: n, Event: e}, counted: true}
	if d.id = Identity(&e); d.id == "" {
		// No event ID: the line's bytes (a NUL first, as no ID has one).
		sum := sha256.Sum256(bytes.TrimSpace(line))
		d.id = "\x00line:" + hex.EncodeToString(sum[:])
	}
	return d
}
