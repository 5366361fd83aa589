package archive

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/parquetline"
)

// Object is one archive object (an S3 object, or a file of a file://
// archive) and what its key says about its contents.
type Object struct {
	// Key is the S3 key (prefix included), or the path relative to the
	// archive's directory with forward slashes.
	Key  string
	Size int64
	// Table, Kind and Hour are the key's partitions: table=, kind=, and
	// dt= with hr= (UTC). A file sink's file (TABLE/YYYY-MM-DD/HH.jsonl)
	// holds every kind and has no Kind.
	Table string
	Kind  event.Kind
	Hour  time.Time
	// Region, Shard, FirstSeq and LastSeq are the S3 name's
	// REGION.SHARD-FIRSTSEQ-LASTSEQ (empty for a file sink's file; Region
	// is empty for a name written before names held it); Suffix is the 12
	// hex digits of a conflict's distinct key
	// (REGION.SHARD-FIRST-LAST.0123456789ab.jsonl.gz), "" for an ordinary
	// key.
	Region, Shard, FirstSeq, LastSeq string
	Suffix                           string
}

// archiverDir is the folder under the prefix that holds no archive lines
// (the start-up check's object): readers skip it.
const archiverDir = "_archiver"

// skipDir reports whether a key relative to the archive's root lies in a
// folder that holds no archive lines: _archiver/ or _manifests/.
func skipDir(rel string) bool {
	return rel == archiverDir || strings.HasPrefix(rel, archiverDir+"/") || strings.HasPrefix(rel, manifest.Dir)
}

// extensions lists the object name endings readers accept, longest first.
var extensions = []string{".jsonl.gz", ".jsonl.zst", ".jsonl", parquetline.Ext}

// ParseKey reads what an archive key says, rel being the key below the
// archive's prefix (or directory): the S3 sink's
//
//	table=T/kind=K/dt=YYYY-MM-DD/hr=HH/[REGION.]SHARD-FIRSTSEQ-LASTSEQ[.HASH12](.jsonl[.gz|.zst]|.parquet)
//
// (a key written before keys named the Region has none) or the file sink's TABLE/YYYY-MM-DD/HH.jsonl (also .jsonl.gz or
// .jsonl.zst). The returned Object has no Key or Size. An error says which
// part does not follow the layout.
func ParseKey(rel string) (Object, error) {
	parts := strings.Split(rel, "/")
	if strings.HasPrefix(rel, "table=") {
		return parseS3Key(parts)
	}
	return parseFileKey(parts)
}

func parseS3Key(parts []string) (Object, error) {
	if len(parts) != 5 {
		return Object{}, fmt.Errorf("want table=T/kind=K/dt=YYYY-MM-DD/hr=HH/NAME, got %d path segments", len(parts))
	}
	var o Object
	vals := make([]string, 4)
	for i, name := range []string{"table", "kind", "dt", "hr"} {
		v, ok := strings.CutPrefix(parts[i], name+"=")
		if !ok || v == "" {
			return Object{}, fmt.Errorf("segment %d: want %s=VALUE, got %q", i+1, name, parts[i])
		}
		vals[i] = v
	}
	o.Table, o.Kind = vals[0], event.Kind(vals[1])
	if !o.Kind.Valid() && o.Kind != event.Undecodable {
		return Object{}, fmt.Errorf("kind=%s: not one of expired, deleted, inserted, modified", vals[1])
	}
	hour, err := parseHour(vals[2], vals[3])
	if err != nil {
		return Object{}, err
	}
	o.Hour = hour
	if err = o.parseName(parts[4]); err != nil {
		return Object{}, err
	}
	return o, nil
}

func parseFileKey(parts []string) (Object, error) {
	if len(parts) != 3 {
		return Object{}, fmt.Errorf("want TABLE/YYYY-MM-DD/HH.jsonl or table=T/kind=K/dt=YYYY-MM-DD/hr=HH/NAME, got %d path segments", len(parts))
	}
	if parts[0] == "" {
		return Object{}, errors.New("empty table name")
	}
	base, ok := trimExtension(parts[2])
	if !ok {
		return Object{}, fmt.Errorf("%q: want HH.jsonl, .jsonl.gz or .jsonl.zst", parts[2])
	}
	hour, err := parseHour(parts[1], base)
	if err != nil {
		return Object{}, err
	}
	return Object{Table: parts[0], Hour: hour}, nil
}

// parseHour reads dt= and hr= values into the hour they name (UTC).
func parseHour(day, hr string) (time.Time, error) {
	d, err := time.Parse("2006-01-02", day)
	if err != nil {
		return time.Time{}, fmt.Errorf("dt=%s: want YYYY-MM-DD", day)
	}
	if len(hr) != 2 || hr[0] < '0' || hr[0] > '2' || hr[1] < '0' || hr[1] > '9' || (hr[0] == '2' && hr[1] > '3') {
		return time.Time{}, fmt.Errorf("hr=%s: want two digits 00 to 23", hr)
	}
	return d.Add(time.Duration(int(hr[0]-'0')*10+int(hr[1]-'0')) * time.Hour), nil
}

// trimExtension cuts one of the accepted extensions off name.
func trimExtension(name string) (string, bool) {
	for _, ext := range extensions {
		if base, ok := strings.CutSuffix(name, ext); ok {
			return base, true
		}
	}
	return "", false
}

// parseName reads [REGION.]SHARD-FIRSTSEQ-LASTSEQ[.HASH12] with an
// extension into o. Neither a Region nor a shard ID holds a '.', and a
// Region is never 12 hex digits (it has a hyphen) nor a SHARD-FIRST-LAST
// (its sequence numbers would be decimal): the two optional parts are
// told apart by their form. The shard ID may itself hold hyphens, so the
// two sequence numbers are taken from the end.
func (o *Object) parseName(name string) error {
	base, ok := trimExtension(name)
	if !ok {
		return fmt.Errorf("%q: want [REGION.]SHARD-FIRSTSEQ-LASTSEQ.jsonl, .jsonl.gz, .jsonl.zst or .parquet", name)
	}
	parts := strings.Split(base, ".")
	if n := len(parts); n > 1 && len(parts[n-1]) == 12 && strings.Trim(parts[n-1], "0123456789abcdef") == "" {
		o.Suffix, parts = parts[n-1], parts[:n-1]
	}
	switch {
	case len(parts) == 2 && event.ValidRegion(parts[0]):
		o.Region, base = parts[0], parts[1]
	case len(parts) == 1:
		base = parts[0]
	default:
		return fmt.Errorf("%q: want [REGION.]SHARD-FIRSTSEQ-LASTSEQ[.HASH12] (a Region, a 12-digit hex suffix)", name)
	}
	i := strings.LastIndexByte(base, '-')
	if i <= 0 {
		return fmt.Errorf("%q: want [REGION.]SHARD-FIRSTSEQ-LASTSEQ", name)
	}
	j := strings.LastIndexByte(base[:i], '-')
	if j <= 0 {
		return fmt.Errorf("%q: want [REGION.]SHARD-FIRSTSEQ-LASTSEQ", name)
	}
	o.Shard, o.FirstSeq, o.LastSeq = base[:j], base[j+1:i], base[i+1:]
	if !event.ValidSequence(o.FirstSeq) || !event.ValidSequence(o.LastSeq) {
		return fmt.Errorf("%q: FIRSTSEQ %q and LASTSEQ %q must be decimal sequence numbers", name, o.FirstSeq, o.LastSeq)
	}
	if event.CompareSequence(o.FirstSeq, o.LastSeq) > 0 {
		return fmt.Errorf("%q: FIRSTSEQ %s is above LASTSEQ %s", name, o.FirstSeq, o.LastSeq)
	}
	return nil
}

// inHour reports whether t lies in the UTC hour that starts at hour.
func inHour(t, hour time.Time) bool {
	u := t.Unix() // floor of the seconds
	return hour.Nanosecond() == 0 && hour.Unix() == u-((u%3600)+3600)%3600
}

// Mismatch says how an event read from the object contradicts the
// object's key: another table, kind (the S3 layout), hour of deletion,
// Region (when the key names one), shard, or a sequence number outside
// SHARD-FIRSTSEQ-LASTSEQ. It returns "" when the key fits the event.
func (o *Object) Mismatch(e *event.Event) string {
	switch {
	case e.Table != o.Table:
		return fmt.Sprintf("table %q, the key says %q", e.Table, o.Table)
	case o.Kind != "" && e.Kind != o.Kind:
		return fmt.Sprintf("kind %s, the key says %s", e.Kind, o.Kind)
	case !inHour(e.ApproximateCreationTime, o.Hour):
		return fmt.Sprintf("deleted at %s, the key says hour %s", e.ApproximateCreationTime.UTC().Format(time.RFC3339), o.Hour.Format("2006-01-02T15"))
	case o.Region != "" && e.Region != o.Region:
		return fmt.Sprintf("Region %q, the key says %s", e.Region, o.Region)
	case o.Shard != "" && e.ShardID != o.Shard:
		return fmt.Sprintf("shard %s, the key says %s", e.ShardID, o.Shard)
	case o.FirstSeq != "" && (event.CompareSequence(e.SequenceNumber, o.FirstSeq) < 0 || event.CompareSequence(e.SequenceNumber, o.LastSeq) > 0):
		return fmt.Sprintf("sequence number %s outside the key's %s-%s", e.SequenceNumber, o.FirstSeq, o.LastSeq)
	}
	return ""
}
