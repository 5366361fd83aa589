package manifest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

const arn = "arn:aws:dynamodb:eu-west-1:000000000000:table/sessions/stream/2026-11-01T00:00:00.000"

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// chain builds manifests of one shard over the given boundaries: ranges
// (b[0], b[1]], (b[1], b[2]], ..., each naming the one before (the first
// names prev), the last ended when ended.
func chain(shard, parent, prev string, ended bool, bounds ...string) []Stored {
	var out []Stored
	for i := 0; i+1 < len(bounds); i++ {
		r := Range{StreamARN: arn, Region: "eu-west-1", Table: "sessions", ShardID: shard, ParentShardID: parent,
			From: bounds[i], To: bounds[i+1], FirstTime: t0.Add(time.Duration(i) * time.Minute), LastTime: t0.Add(time.Duration(i+1) * time.Minute),
			Records: 10, Events: map[event.Kind]int64{event.Expired: 3}, Ended: ended && i+2 == len(bounds)}
		m := New(r, []Object{{Key: "table=sessions/x" + bounds[i+1] + ".jsonl.gz", Bytes: 5, SHA256: strings.Repeat("ab", 32)}}, prev, "w1", t0)
		b := Encode(m)
		s := Stored{Key: Key(m), Digest: Digest(b), M: m}
		out = append(out, s)
		prev = s.Digest
	}
	return out
}

func last(s []Stored) string { return s[len(s)-1].Digest }

// ends is the last of a shard's manifests, as a windowed read keeps it
// (EndOnly).
func ends(s []Stored) []Stored {
	out := []Stored{s[len(s)-1]}
	out[0].EndOnly = true
	return out
}

func TestCheck(t *testing.T) {
	parent := chain("shard-1", "", "", true, "", "100", "200", "300")
	child := chain("shard-2", "shard-1", last(parent), false, "", "400", "500")
	edited := chain("shard-1", "", "", true, "", "100", "200", "300")
	edited[1].Digest = Digest([]byte("someone else's bytes"))
	trimmed := chain("shard-1", "", "", false, "", "100")
	trimmed[0].M.Trimmed = &Trimmed{First: "50", Time: t0}
	midTrim := chain("shard-1", "", "", false, "", "100", "200")
	midTrim[1].M.Trimmed = &Trimmed{First: "150", Time: t0}
	skipped := chain("shard-1", "", "", false, "", "100", "200")
	skipped[0].M.Trimmed = &Trimmed{First: "50", Time: t0, Skipped: true}
	trimmedTwice := chain("shard-1", "", "", false, "", "100")
	trimmedTwice[0].M.Trimmed = &Trimmed{First: "50", Time: t0}
	again := trimmedTwice[0]
	again.Key, again.Digest = ConflictKey(again.M, strings.Repeat("cd", 32)), strings.Repeat("cd", 32)
	trimmedTwice = append(trimmedTwice, again)
	openParent := chain("shard-1", "", "", false, "", "100")
	begun := chain("shard-1", "", "", false, "900", "1000", "1100")
	crash := append(chain("shard-1", "", "", false, "", "100", "200"), chain("shard-1", "", last(chain("shard-1", "", "", false, "", "100")), false, "100", "200", "300")...)
	openLong := chain("shard-1", "", "", false, "", "100", "200", "300")
	editedEnd := ends(parent)
	editedEnd[0].Digest = Digest([]byte("someone else's bytes"))
	tests := []struct {
		name     string
		in       []Stored
		findings []string // kinds, in order
		shards   int
		gaps     int
		begun    bool
		outside  int
	}{
		{"a parent read at its end, its child whole", append(ends(parent), child...), nil, 1, 0, false, 1},
		{"a parent read at its end, never ended", append(ends(openLong), chain("shard-2", "shard-1", "", false, "", "400")...), []string{FindParent}, 1, 0, false, 1},
		{"a parent read at its end, its last edited", append(editedEnd, child...), []string{FindChain}, 1, 0, false, 1},
		{"a parent and its child", append(copyOf(parent), child...), nil, 2, 0, false, 0},
		{"middle manifest removed", append(copyOf(parent[:1]), parent[2:]...), []string{FindGap, FindChain}, 1, 1, false, 0},
		{"first manifest removed", copyOf(parent[1:]), []string{FindChain}, 1, 0, false, 0},
		{"manifest edited", edited, []string{FindChain}, 1, 0, false, 0},
		{"parent's last manifest removed", append(copyOf(parent[:2]), child...), []string{FindChain, FindParent}, 2, 0, false, 0},
		{"trimmed start", trimmed, []string{FindTrimmed}, 1, 0, false, 0},
		{"trimmed after a range", midTrim, []string{FindTrimmed}, 1, 0, false, 0},
		{"LATEST start", skipped, []string{FindSkipped}, 1, 0, false, 0},
		{"trimmed start recorded twice", trimmedTwice, []string{FindTrimmed}, 1, 0, false, 0},
		{"child of an open parent", append(copyOf(openParent), chain("shard-2", "shard-1", "", false, "", "400")...), []string{FindParent}, 2, 0, false, 0},
		{"recording begun mid-shard", begun, nil, 1, 0, true, 0},
		{"a range recorded again after a crash", crash, nil, 1, 0, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.in)
			var kinds []string
			for _, f := range res.Findings {
				kinds = append(kinds, f.Kind)
				if f.Shard == "" || f.Stream != arn || f.Detail == "" {
					t.Errorf("finding %+v does not name its stream, shard and cause", f)
				}
			}
			if strings.Join(kinds, ",") != strings.Join(tc.findings, ",") {
				t.Errorf("findings %v, want %v: %+v", kinds, tc.findings, res.Findings)
			}
			if len(res.Shards) != tc.shards || len(res.Outside) != tc.outside {
				t.Fatalf("%d shards and %d outside, want %d and %d", len(res.Shards), len(res.Outside), tc.shards, tc.outside)
			}
			for _, o := range res.Outside {
				if o.Manifests != 1 || o.Start == "" || o.To == "" {
					t.Errorf("outside shard %+v: want its last range", o)
				}
			}
			if res.Shards[0].Gaps != tc.gaps || res.Shards[0].Begun != tc.begun {
				t.Errorf("shard %+v: want %d gaps, begun %v", res.Shards[0], tc.gaps, tc.begun)
			}
		})
	}
}

// TestCheckTrimmedNamesWhat: a finding about records not read names the
// range they were in: from the shard's start or after the range's From, up
// to the first record read.
func TestCheckTrimmedNamesWhat(t *testing.T) {
	ms := chain("shard-1", "", "", false, "", "100", "200")
	ms[1].M.Trimmed = &Trimmed{First: "150", Time: t0}
	res := Check(ms)
	if len(res.Findings) != 1 {
		t.Fatalf("findings %+v, want one", res.Findings)
	}
	if f := res.Findings[0]; f.From != "100" || f.To != "150" || !f.Before.Equal(t0) || !strings.Contains(f.Detail, "after 100 before 150") {
		t.Errorf("finding %+v: want the records after 100 before 150", f)
	}
	m := ms[1].M
	if got, err := Decode(bytes.NewReader(Encode(m))); err != nil || *got.Trimmed != *m.Trimmed {
		t.Errorf("Decode(Encode) of a range trimmed after its From: %+v, %v", got.Trimmed, err)
	}
	m.Trimmed = &Trimmed{First: "100", Time: t0}
	if _, err := Decode(bytes.NewReader(Encode(m))); err == nil {
		t.Error("Decode took trimmed.first at the range's From (a record it did not read)")
	}
}

// TestCheckGapNamesRangeAndTime: a gap names the missing range and the
// creation times of the records around it.
func TestCheckGapNamesRangeAndTime(t *testing.T) {
	ms := chain("shard-1", "", "", false, "", "100", "200", "300")
	res := Check([]Stored{ms[0], ms[2]})
	if len(res.Findings) == 0 || res.Findings[0].Kind != FindGap {
		t.Fatalf("findings %+v, want a gap first", res.Findings)
	}
	g := res.Findings[0]
	if g.From != "100" || g.To != "200" || !g.After.Equal(t0.Add(time.Minute)) || !g.Before.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("gap %+v: want (100, 200] between %v and %v", g, t0.Add(time.Minute), t0.Add(2*time.Minute))
	}
	if sh := res.Shards[0]; sh.Records != 20 || sh.Events["expired"] != 6 || len(sh.Covered) != 2 {
		t.Errorf("shard %+v: want 20 records, 6 expired, two covered ranges", sh)
	}
}

func copyOf(s []Stored) []Stored { return append([]Stored(nil), s...) }

func TestEncodeDecode(t *testing.T) {
	m := chain("shard-1", "shard-0", strings.Repeat("0", 64), true, "", "42")[0].M
	m.DeadLettered = map[string]int64{event.ReasonPermanent: 2}
	b := Encode(m)
	if !bytes.Equal(b, Encode(m)) {
		t.Fatal("Encode is not deterministic")
	}
	got, err := Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Encode(got), b) {
		t.Errorf("round trip changed the manifest:\n%s\n%s", b, Encode(got))
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := string(Encode(chain("shard-1", "", "", false, "", "42")[0].M))
	tests := map[string]string{
		"empty":            "",
		"not json":         "{",
		"unknown field":    strings.Replace(good, `"version":1`, `"version":1,"extra":true`, 1),
		"other version":    strings.Replace(good, `"version":1`, `"version":2`, 1),
		"bad stream":       strings.Replace(good, `"stream":"arn:`, `"stream":"nope:`, 1),
		"bad to":           strings.Replace(good, `"to":"42"`, `"to":"4x2"`, 1),
		"from after to":    strings.Replace(good, `"from":""`, `"from":"99"`, 1),
		"bad prev":         strings.Replace(good, `"prev":""`, `"prev":"xyz"`, 1),
		"bad kind":         strings.Replace(good, `"events":{"expired":3}`, `"events":{"lost":3}`, 1),
		"escaping key":     strings.Replace(good, `"key":"table=`, `"key":"../table=`, 1),
		"two objects":      good + good,
		"negative records": strings.Replace(good, `"records":10`, `"records":-1`, 1),
		"trimmed past to":  strings.Replace(good, `"objects"`, `"trimmed":{"first":"43","time":"2026-11-01T12:00:00Z"},"objects"`, 1),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(strings.NewReader(in)); err == nil {
				t.Errorf("Decode took %q", in)
			}
		})
	}
}

func TestKey(t *testing.T) {
	m := chain("shardId-0001", "", "", false, "", "42")[0].M
	k := Key(m)
	want := "_manifests/table=sessions/region=eu-west-1/stream=2026-11-01T00:00:00.000/shard=shardId-0001/" + strings.Repeat("0", 62) + "42.json"
	if k != want || !IsKey(k) {
		t.Errorf("Key = %q, want %q", k, want)
	}
	m.Shard = "../../x"
	if k := Key(m); strings.Contains(k, "/../") {
		t.Errorf("Key %q lets a shard ID leave its folder", k)
	}
	m.Shard = "shardId-0001"
	for _, k := range []string{Key(m), ConflictKey(m, strings.Repeat("ab", 32))} {
		if p := EndingAt(m.Table, m.Region, m.Stream, m.Shard, m.To); !strings.HasPrefix(k, p) {
			t.Errorf("EndingAt = %q, not a prefix of %q", p, k)
		}
	}
	longer := m
	longer.To = "420"
	if p := EndingAt(m.Table, m.Region, m.Stream, m.Shard, m.To); strings.HasPrefix(Key(longer), p) {
		t.Errorf("EndingAt(42) = %q is a prefix of %q", p, Key(longer))
	}
	a, b := m, m
	a.To, b.To = "9", "10"
	if Key(a) >= Key(b) {
		t.Errorf("keys do not sort by To: %q >= %q", Key(a), Key(b))
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(chain("shard-1", "", "", false, "", "42")[0].M))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		// A manifest that decodes renders, decodes again to the same, and
		// has a key inside its shard's folder.
		again, err := Decode(bytes.NewReader(Encode(m)))
		if err != nil {
			t.Fatalf("re-decoding %s: %v", Encode(m), err)
		}
		if !bytes.Equal(Encode(again), Encode(m)) {
			t.Fatalf("not stable: %s", Encode(m))
		}
		if k := Key(m); strings.Contains(k, "/../") || !IsKey(k) {
			t.Fatalf("key %q", k)
		}
		Check([]Stored{{Key: Key(m), Digest: Digest(Encode(m)), M: m}})
	})
}
