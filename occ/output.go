package occ

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// Output formats (-o). jsonpath takes a template: -o jsonpath='{.items[*].name}'
// (kubectl's JSONPath syntax), evaluated over the JSON a command prints
// with -o json.
const (
	outTable    = "table"
	outWide     = "wide"
	outJSON     = "json"
	outYAML     = "yaml"
	outName     = "name"
	outJSONPath = "jsonpath"
)

// outputFormats lists -o's values for help and completion.
var outputFormats = []string{outTable, outWide, outJSON, outYAML, outName, outJSONPath + "=TEMPLATE"}

// checkOutput validates -o.
func checkOutput(o string) error {
	switch f, tmpl, _ := strings.Cut(o, "="); f {
	case outTable, outWide, outJSON, outYAML, outName:
		if tmpl != "" {
			return fmt.Errorf("output format %q takes no template", f)
		}
		return nil
	case outJSONPath:
		if tmpl == "" {
			return fmt.Errorf("-o jsonpath needs a template: -o jsonpath='{.name}'")
		}
		_, err := parseJSONPath(tmpl)
		return err
	}
	return fmt.Errorf("unknown output format %q (%s)", o, strings.Join(outputFormats, ", "))
}

func parseJSONPath(tmpl string) (*jsonpath.JSONPath, error) {
	jp := jsonpath.New("occ").AllowMissingKeys(true)
	if err := jp.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("-o jsonpath: %w", err)
	}
	return jp, nil
}

// table is what the table formats print. Columns listed in wide appear
// only with -o wide; names are what -o name prints, one per row
// (kind/name, like kubectl).
type table struct {
	header []string
	rows   [][]string
	wide   map[int]bool
	names  []string
	// trailer is printed after the table formats' rows (config get shows
	// the document).
	trailer string
}

// wideCols marks the columns at these indexes wide-only.
func wideCols(idx ...int) map[int]bool {
	m := make(map[int]bool, len(idx))
	for _, i := range idx {
		m[i] = true
	}
	return m
}

// print writes v in the chosen format; tbl builds the table, wide and name
// formats (nil: those formats show v as JSON).
func (a *app) print(w io.Writer, v any, tbl func() table) error {
	format, tmpl, _ := strings.Cut(a.settings.Output, "=")
	switch {
	case format == outJSON, tbl == nil && (format == outTable || format == outWide || format == outName):
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case format == outYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case format == outJSONPath:
		return printJSONPath(w, v, tmpl)
	case format == outName:
		for _, n := range tbl().names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	}
	return a.printTable(w, tbl(), format == outWide)
}

func (a *app) printTable(w io.Writer, t table, wide bool) error {
	keep := func(row []string) []string {
		out := make([]string, 0, len(row))
		for i, c := range row {
			if wide || !t.wide[i] {
				out = append(out, c)
			}
		}
		return out
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !a.settings.NoHeaders {
		fmt.Fprintln(tw, strings.Join(keep(t.header), "\t"))
	}
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(keep(r), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, t.trailer)
	return err
}

// printJSONPath evaluates tmpl over v's JSON form; a list's items are
// reachable as .items, as in the API's collection envelope.
func printJSONPath(w io.Writer, v any, tmpl string) error {
	jp, err := parseJSONPath(tmpl)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	if list, ok := doc.([]any); ok {
		doc = map[string]any{"items": list}
	}
	if err := jp.Execute(w, doc); err != nil {
		return fmt.Errorf("-o jsonpath: %w", err)
	}
	_, err = fmt.Fprintln(w)
	return err
}

// printRaw prints a JSON document in the chosen format; the table formats
// show it as indented JSON.
func (a *app) printRaw(w io.Writer, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return a.print(w, v, nil)
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return dash(id)
}

// revNumber shows a revision by its number; a coordinator that does not
// send numbers gets the short id, and no revision is "-".
func revNumber(n int64, id string) string {
	switch {
	case n > 0:
		return itoa(n)
	case id == "":
		return "-"
	}
	return short(id)
}
