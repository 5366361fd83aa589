package archive

import (
	"context"

	"github.com/ttl-archiver/archiver/sinkurl"
)

// TornTail is a torn tail a file sink cut off one of its files and kept
// (see sinkurl.TornDir): its key as listed and its size.
type TornTail struct {
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"`
}

// TornTails lists the torn tails kept in the archive's sinkurl.TornDir, by
// key: bytes a file sink found after a file's last whole line (a writer
// killed mid-append), cut off and kept before it appended again. Their
// records were never acknowledged and were delivered again, so they are
// no finding; an archive with none, an S3 archive among them, lists none.
func (a *Archive) TornTails(ctx context.Context) ([]TornTail, error) {
	var out []TornTail
	err := a.st.list(ctx, sinkurl.TornDir, func(key, _ string, size int64) {
		out = append(out, TornTail{Key: key, Bytes: size})
	})
	return out, err
}
