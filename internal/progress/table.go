package progress

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a summary printed at the end of a command: a title, a header
// and rows, columns aligned, numeric cells right-aligned.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
}

// KV is a two-column table of names and values, the usual summary.
func KV(title string, pairs ...any) Table {
	t := Table{Title: title}
	for i := 0; i+1 < len(pairs); i += 2 {
		t.Rows = append(t.Rows, []string{fmt.Sprint(pairs[i]), fmt.Sprint(pairs[i+1])})
	}
	return t
}

// Add appends a row.
func (t *Table) Add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.Rows = append(t.Rows, row)
}

// Print writes the table to w.
func (t Table) Print(w io.Writer) error {
	var widths []int
	measure := func(row []string) {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	measure(t.Header)
	for _, r := range t.Rows {
		measure(r)
	}
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(t.Title + "\n")
	}
	line := func(row []string) {
		var l strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if numeric(c) && i > 0 {
				l.WriteString("  " + pad + c)
			} else {
				l.WriteString("  " + c + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	if len(t.Header) > 0 {
		line(t.Header)
		rule := make([]string, len(t.Header))
		for i := range rule {
			rule[i] = strings.Repeat("-", widths[i])
		}
		line(rule)
	}
	for _, r := range t.Rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// numeric reports whether a cell reads as a number (right-aligned).
func numeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && c != '.' && c != '-' && c != ',' && c != '%' {
			return false
		}
	}
	return true
}
