package engine

import (
	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Consumed capacity (ReturnConsumedCapacity): the units a read or write
// costs and how a response reports them, per table and per index.

type capacity struct {
	TableName              string              `json:"TableName"`
	CapacityUnits          float64             `json:"CapacityUnits"`
	ReadCapacityUnits      float64             `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits     float64             `json:"WriteCapacityUnits,omitempty"`
	Table                  *capUnits           `json:"Table,omitempty"`
	GlobalSecondaryIndexes map[string]capUnits `json:"GlobalSecondaryIndexes,omitempty"`
	LocalSecondaryIndexes  map[string]capUnits `json:"LocalSecondaryIndexes,omitempty"`
}

type capUnits struct {
	CapacityUnits      float64 `json:"CapacityUnits"`
	ReadCapacityUnits  float64 `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits float64 `json:"WriteCapacityUnits,omitempty"`
}

func checkRCC(s string) error {
	switch s {
	case "", "NONE", "TOTAL", "INDEXES":
		return nil
	}
	return awserr.Validation("1 validation error detected: Value '%s' at 'returnConsumedCapacity' failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]", s)
}

func writeUnits(size int) float64 {
	u := (size + 1023) / 1024
	if u < 1 {
		u = 1
	}
	return float64(u)
}

func readUnits(size int, consistent bool) float64 {
	u := float64((size + 4095) / 4096)
	if u < 1 {
		u = 1
	}
	if !consistent {
		u /= 2
	}
	return u
}

// consumed builds a ConsumedCapacity for mode (TOTAL/INDEXES) or nil.
func consumed(mode, tableName string, units float64, write bool, gsiUnits map[string]float64) *capacity {
	if mode != "TOTAL" && mode != "INDEXES" {
		return nil
	}
	c := &capacity{TableName: tableName, CapacityUnits: units}
	total := units
	for _, u := range gsiUnits {
		total += u
	}
	c.CapacityUnits = total
	if write {
		c.WriteCapacityUnits = total
	} else {
		c.ReadCapacityUnits = total
	}
	if mode == "INDEXES" {
		tu := capUnits{CapacityUnits: units}
		if write {
			tu.WriteCapacityUnits = units
		} else {
			tu.ReadCapacityUnits = units
		}
		c.Table = &tu
		if len(gsiUnits) > 0 {
			c.GlobalSecondaryIndexes = map[string]capUnits{}
			for n, u := range gsiUnits {
				cu := capUnits{CapacityUnits: u}
				if write {
					cu.WriteCapacityUnits = u
				} else {
					cu.ReadCapacityUnits = u
				}
				c.GlobalSecondaryIndexes[n] = cu
			}
		}
	}
	return c
}

// gsiWriteUnits charges one write per GSI whose key attributes are present
// in the old or new item.
func (t *table) gsiWriteUnits(oldItem, newItem attr.Item, size int) map[string]float64 {
	if len(t.gsis) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, ix := range t.gsis {
		n := 0.0
		for _, it := range []attr.Item{oldItem, newItem} {
			if it == nil {
				continue
			}
			if _, ok := it[ix.key.Hash]; ok {
				n += writeUnits(size)
			}
		}
		if n > 0 {
			out[ix.name] = n
		}
	}
	return out
}

func (t *table) gsiWriteUnitsSafe(mode string, oldItem, newItem attr.Item, size int) map[string]float64 {
	if mode != "INDEXES" && mode != "TOTAL" {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.gsiWriteUnits(oldItem, newItem, size)
}
