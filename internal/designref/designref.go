// Package designref maps the citations oce's comments make — "REFERENCE
// §1.3", "docs/design/seed-000.md#step-3", "docs/design/codex.md#s6" — to the pages and anchors of
// docs/design/, which holds the seed pages and the design notes in the
// repository, and checks that every docs/design link resolves.
//
// Link form: docs/design/<file>.md#<anchor>, with reference.md#sN-M for
// REFERENCE §N.M, seed-00N.md#step-K for a seed's Kth trace step,
// codex.md#sN and openclaw.md#sN-M for the measured notes.
package designref

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Dir is docs/design relative to the module root.
const Dir = "docs/design"

// Link matches a docs/design link in text.
var Link = regexp.MustCompile(`docs/design/([a-z0-9-]+\.md)(?:#([a-z0-9-]+))?`)

// Stale matches a design note cited where someone with only the repository
// cannot open it: by a path outside docs/design (design/<NOTE>.md or
// shared/design/<file>, the planning copies), or by the bare name of a
// planning note. Old-form section citations (a note's name followed by a
// section sign) are Rewrite's and do not match.
var Stale = regexp.MustCompile(`(?:^|[^\w./-])((?:shared/)?design/[\w.-]+|(?:ARCHITECTURE|ANCHORS|KUBELET-TESTENV|KUBERNETES-TESTENV|REFERENCE|CODEX|OPENCLAW)\.md(?: §)?)`)

// Doc matches a link to a page of docs/ (outside docs/design).
var Doc = regexp.MustCompile(`\bdocs/([\w-]+\.md)`)

var (
	// "docs/design/reference.md#s1-3", "docs/design/reference.md#s1-3, docs/design/reference.md#s1-4, docs/design/reference.md#s5", "docs/design/reference.md#s6-2, docs/design/reference.md#s6-3",
	// "docs/design/reference.md#s3 and docs/design/reference.md#s7", "docs/design/reference.md#s3, docs/design/reference.md#s7".
	refCite = regexp.MustCompile(`\b(REFERENCE|CODEX\.md|OPENCLAW\.md) §(\d+(?:\.\d+)?)((?:(?:, | and |/|–)§?\d+(?:\.\d+)?)*)`)
	more    = regexp.MustCompile(`(, | and |/|–)§?(\d+(?:\.\d+)?)`)
	// "docs/design/seed-000.md#step-3", "docs/design/seed-001.md".
	seedCite = regexp.MustCompile(`\bseed (00[0-3])(?: step (\d+))?\b`)
)

var pages = map[string]string{"REFERENCE": "reference.md", "CODEX.md": "codex.md", "OPENCLAW.md": "openclaw.md"}

func section(file, num string) string {
	return Dir + "/" + file + "#s" + strings.ReplaceAll(num, ".", "-")
}

// Rewrite replaces every citation in text by its docs/design link(s) and
// reports how many citations it rewrote.
func Rewrite(text string) (string, int) {
	n := 0
	text = refCite.ReplaceAllStringFunc(text, func(m string) string {
		g := refCite.FindStringSubmatch(m)
		file := pages[g[1]]
		links := []string{section(file, g[2])}
		seps := []string{}
		for _, x := range more.FindAllStringSubmatch(g[3], -1) {
			sep := x[1]
			if sep == "–" || sep == "/" {
				sep = ", "
			}
			seps = append(seps, sep)
			links = append(links, section(file, x[2]))
		}
		n += len(links)
		var b strings.Builder
		b.WriteString(links[0])
		for i, l := range links[1:] {
			b.WriteString(seps[i] + l)
		}
		return b.String()
	})
	text = seedCite.ReplaceAllStringFunc(text, func(m string) string {
		g := seedCite.FindStringSubmatch(m)
		n++
		link := Dir + "/seed-" + g[1] + ".md"
		if g[2] != "" {
			link += "#step-" + g[2]
		}
		return link
	})
	return text, n
}

// Resolver checks links against docs/design under a module root.
type Resolver struct {
	root    string
	anchors map[string]map[string]bool // file → anchors
	docs    map[string]bool            // the pages of docs/
}

// NewResolver reads docs/design under root.
func NewResolver(root string) (*Resolver, error) {
	r := &Resolver{root: root, anchors: map[string]map[string]bool{}, docs: map[string]bool{}}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, f := range docs {
		r.docs[filepath.Base(f)] = true
	}
	files, err := filepath.Glob(filepath.Join(root, Dir, "*.md"))
	if err != nil {
		return nil, err
	}
	id := regexp.MustCompile(`<a id="([a-z0-9-]+)"></a>`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for _, m := range id.FindAllStringSubmatch(string(b), -1) {
			set[m[1]] = true
		}
		r.anchors[filepath.Base(f)] = set
	}
	return r, nil
}

// Check returns an error for each link in text whose page or anchor is
// missing, each page of docs/ it names that does not exist, and each stale
// design citation.
func (r *Resolver) Check(text string) []error {
	var errs []error
	for _, m := range Stale.FindAllStringSubmatch(text, -1) {
		if !strings.HasSuffix(m[1], " §") {
			errs = append(errs, fmt.Errorf("%s: a design note outside the repository; cite its copy in %s", m[1], Dir))
		}
	}
	for _, m := range Doc.FindAllStringSubmatch(text, -1) {
		if !r.docs[m[1]] {
			errs = append(errs, fmt.Errorf("%s: no such page in docs", m[0]))
		}
	}
	for _, m := range Link.FindAllStringSubmatch(text, -1) {
		set, ok := r.anchors[m[1]]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: no such page in %s", m[0], Dir))
		case m[2] != "" && !set[m[2]]:
			errs = append(errs, fmt.Errorf("%s: %s has no anchor %q", m[0], m[1], m[2]))
		}
	}
	return errs
}
