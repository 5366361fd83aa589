package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/parquetline"
)

// decodeDepth is how many downloaded groups are decoded ahead of the one
// being read; chunkLines is the lines in one chunk, and chunkAhead the
// chunks one object's decoder may hold ready. A chunk read goes back to
// its decoder, which allocates one only when none came back, so an object
// has at most chunkAhead + 2 chunks (ready, being filled, being read), and
// decoded lines in memory are bounded by (decodeDepth + 2) groups ×
// (chunkAhead + 2) chunks per object.
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
	id   identity
	err  error
	// counted: a line of the body (Stats.Lines); a broken body is not.
	counted bool
}

type chunk []decoded

// decodeOpts says how an object's lines are decoded: without their
// images (skipImages), and with the identity an expiry has in every
// Region (crossRegion: its group's partition holds several Regions'
// records, see group) rather than its event ID.
type decodeOpts struct {
	skipImages, crossRegion bool
}

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
			j.free = make([]chan chunk, len(j.g.objs))
			for i := range j.g.objs {
				ch, free := make(chan chunk, chunkAhead), make(chan chunk, chunkAhead+1)
				j.dec[i], j.free[i] = ch, free
				if j.err != nil {
					close(ch)
					continue
				}
				body, enc := j.bodies[i], j.encs[i]
				j.bodies[i] = nil
				key := j.g.objs[i].Key
				o := decodeOpts{skipImages: skipImages, crossRegion: j.g.crossRegion}
				wg.Go(func() { decodeObject(ctx, key, body, enc, o, ch, free) })
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
// one error at the line where it broke. Chunks the reader is done with
// come back on free and are filled again.
func decodeObject(ctx context.Context, key string, body []byte, enc string, o decodeOpts, out chan<- chunk, free <-chan chunk) {
	defer close(out)
	var c chunk
	send := func() bool {
		if len(c) == 0 {
			return true
		}
		select {
		case out <- c:
		case <-ctx.Done():
			return false
		}
		select {
		case c = <-free:
		default:
			c = make(chunk, 0, chunkLines)
		}
		return true
	}
	if strings.HasSuffix(key, parquetline.Ext) {
		decodeParquet(key, body, o, &c, send)
		send()
		return
	}
	zr, closeFn, err := objstore.Decompress(bytes.NewReader(body), enc, key)
	if err != nil {
		c = append(c, decoded{line: Line{Object: key, Line: 1}, err: err})
		send()
		return
	}
	defer closeFn()
	c = make(chunk, 0, chunkLines)
	sp := &lineSplitter{r: zr, buf: make([]byte, 64<<10)} // grows for a longer line
	names := &event.LineDecoder{}
	for n := 1; ; n++ {
		line, tooLong, err := sp.next()
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
			c = append(c, decoded{})
			decodeLine(&c[len(c)-1], key, n, line, names, o)
		}
		if err == io.EOF || (len(c) >= chunkLines && !send()) {
			break
		}
	}
	send()
}

// decodeParquet decodes a Parquet object's rows as the lines they are
// (parquetline.Lines), sending full chunks as it goes; a file that is
// not an archive's Parquet is one error at its first row.
func decodeParquet(key string, body []byte, o decodeOpts, c *chunk, send func() bool) {
	names := &event.LineDecoder{}
	stopped := errors.New("stopped")
	err := parquetline.Lines(body, func(n int, line []byte) error {
		*c = append(*c, decoded{})
		decodeLine(&(*c)[len(*c)-1], key, n, line, names, o)
		if len(*c) >= chunkLines && !send() {
			return stopped
		}
		return nil
	})
	if err != nil && err != stopped {
		*c = append(*c, decoded{line: Line{Object: key, Line: 1}, err: err})
	}
}

// lineSplitter cuts a decompressed body into lines, in place in one
// buffer: a line is valid until the next call, and only the part of a
// line a read left unfinished is ever moved.
type lineSplitter struct {
	r          io.Reader
	buf        []byte
	start, end int   // buf[start:end] is read and not yet returned
	err        error // the reader's error, once it gave one
}

// next returns the next line without its newline. A line longer than
// maxLine is consumed and reported as tooLong (its bytes dropped). err is
// the reader's error (io.EOF at the end) once it ended this line; the
// line then holds what came before it.
func (s *lineSplitter) next() (line []byte, tooLong bool, err error) {
	for {
		if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
			line = s.buf[s.start : s.start+i]
			s.start += i + 1
			if tooLong || len(line) > maxLine {
				return nil, true, nil
			}
			return line, false, nil
		}
		if s.err != nil {
			line = s.buf[s.start:s.end]
			s.start = s.end
			if tooLong || len(line) > maxLine {
				return nil, true, s.err
			}
			return line, false, s.err
		}
		if tooLong || s.end-s.start > maxLine {
			tooLong, s.start, s.end = true, 0, 0 // drop what came so far
		}
		s.fill()
	}
}

// fill moves the unfinished line to the front of the buffer (growing it
// when the line fills it) and reads more after it.
func (s *lineSplitter) fill() {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.end == len(s.buf) {
		s.buf = append(s.buf, make([]byte, len(s.buf))...)
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	s.err = err
}

// decodeLine decodes one non-empty line and its identity: the fast path,
// which hashes an expiry's ID from the line's own bytes when o asks for
// it, else event.DecodeLine, which explains what is wrong. With
// o.skipImages the event keeps no images (they are checked all the same).
func decodeLine(d *decoded, key string, n int, line []byte, names *event.LineDecoder, o decodeOpts) {
	d.line.Object, d.line.Line, d.counted = key, n, true
	e := &d.line.Event
	var x *event.IDHasher // nil: identities by event ID
	if o.crossRegion {
		x = names.IDHasher()
	}
	head, ok := names.DecodeFast(e, line, o.skipImages)
	switch {
	case ok && head > 0 && x != nil:
		d.id = expiryIdentity(x.ExpiryDigest(line[:head], e.Table))
		return
	case ok:
		d.id = newIdentity(e, x)
	default:
		var err error
		if *e, err = event.DecodeLine(line); err != nil {
			d.err = err
			return
		}
		d.id = newIdentity(e, x) // before the images go
		if o.skipImages {
			e.Keys, e.OldImage, e.NewImage = nil, nil, nil
		}
	}
	if d.id.none() {
		// No event ID: the line's bytes (a NUL first, as no ID has one).
		sum := sha256.Sum256(bytes.TrimSpace(line))
		d.id.s = "\x00line:" + hex.EncodeToString(sum[:])
	}
}
