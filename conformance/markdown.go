package conformance

import (
	"fmt"
	"slices"
	"strings"
)

// Column is one endpoint's run for a table of several: its name as the
// table's header shows it, and its report, or why there is none (it could
// not be installed or started).
type Column struct {
	Name    string
	Report  *Report
	Missing string
}

// Markdown is a table of the runs, a row per check of the suite and a
// column per endpoint (PASS, FAIL, SKIP, with the delay a check measured),
// the grades last; then, per endpoint, what each check that did not pass
// said.
func Markdown(cols []Column) string {
	var b strings.Builder
	b.WriteString("| check |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", cell(c.Name))
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(cols)))
	b.WriteString("\n")
	for _, chk := range Checks() {
		fmt.Fprintf(&b, "| `%s` |", chk.Name)
		for _, c := range cols {
			fmt.Fprintf(&b, " %s |", verdict(c, chk.Name))
		}
		b.WriteString("\n")
	}
	b.WriteString("| **grade** |")
	for _, c := range cols {
		if c.Report == nil {
			b.WriteString(" not measured |")
			continue
		}
		fmt.Fprintf(&b, " **%s** (%d of %d) |", c.Report.Grade, c.Report.Passed, c.Report.Passed+c.Report.Failed)
	}
	b.WriteString("\n")
	for _, c := range cols {
		b.WriteString(notes(c))
	}
	return b.String()
}

// verdict is one cell: the check's status, with the delay it measured.
func verdict(c Column, name string) string {
	if c.Report == nil {
		return "–"
	}
	for _, r := range c.Report.Results {
		if r.Name == name {
			if r.Status == Pass && r.Delay > 0 {
				return fmt.Sprintf("PASS (%s)", round(r.Delay))
			}
			return string(r.Status)
		}
	}
	return "not run"
}

// notes is an endpoint's paragraph: why it was not measured, or what its
// checks that did not pass said, one line for the checks that said the
// same.
func notes(c Column) string {
	if c.Report == nil {
		return fmt.Sprintf("\n**%s** was not measured: %s\n", c.Name, cell(c.Missing))
	}
	var lines []string
	var names [][]string // the checks of each line: those that said the same
	for _, r := range c.Report.Results {
		if r.Status == Pass {
			continue
		}
		line := fmt.Sprintf("%s: %s", r.Status, cell(clip(r.Detail, 400)))
		if i := slices.Index(lines, line); i >= 0 {
			names[i] = append(names[i], r.Name)
			continue
		}
		lines, names = append(lines, line), append(names, []string{r.Name})
	}
	for i := range lines {
		lines[i] = "- `" + strings.Join(names[i], "`, `") + "` " + lines[i]
	}
	if len(lines) == 0 {
		return fmt.Sprintf("\n**%s** passed every check (expiry bound %v).\n", c.Name, c.Report.ExpiryBound)
	}
	return fmt.Sprintf("\n**%s** (expiry bound %v):\n\n%s\n", c.Name, c.Report.ExpiryBound, strings.Join(lines, "\n"))
}

// cell makes text safe in a Markdown table cell or list line.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
