package api

import (
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/ratelimit"
)

// Bounds of what a request may make the coordinator store (issue 25;
// docs/API.md "Caps"): every path segment is checked before the handler
// runs — before any lookup, authorization or audit record — so a refusal
// can only ever name a bounded, well-formed reference.

// Bounds of path segments: a resource reference (a name or an id) and a
// workspace file path.
const (
	maxRefLen      = 128
	maxFilePathLen = 1024
)

// refPattern is what a {ns}, {agent}, {cfg}, {sp}, {user}, {id}, {rev} or
// {name} path segment may hold: names are DNS labels, ids hex.
var refPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~:@-]*$`)

// wildcards lists the wildcard names of a route pattern ("ns", "path...").
func wildcards(pattern string) []string {
	var out []string
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			return out
		}
		out = append(out, pattern[i+1:i+j])
		pattern = pattern[i+j+1:]
	}
}

// checkPath refuses a request whose path segments exceed their bounds:
// 400 INVALID_REQUEST naming the segment, never echoing it.
func checkPath(r *http.Request, names []string, files bool) error {
	for _, n := range names {
		name := strings.TrimSuffix(n, "...")
		v := r.PathValue(name)
		if files && (name == "name" || name == "path") {
			if len(v) > maxFilePathLen || strings.IndexFunc(v, unicode.IsControl) >= 0 {
				return invalid("the file path exceeds %d bytes or holds control characters", maxFilePathLen)
			}
			continue
		}
		if len(v) > maxRefLen || !refPattern.MatchString(v) {
			return invalid("path segment {%s} is not a name or id (at most %d letters, digits and ._~:@-)", name, maxRefLen)
		}
	}
	return nil
}

// denialAudit paces the audit records of one actor's refusals: a token
// bucket per actor (denialBurst records, then one per second). A refusal
// beyond it is answered as always but not recorded on its own; the next
// record of that actor carries how many were folded into it
// (details.suppressed), so the log keeps the count at a bounded size.
type denialAudit struct {
	set        *ratelimit.Set
	unrecorded prometheus.Counter
}

// Pace of denial records per actor.
const (
	denialBurst = 30
	denialRate  = 1 // a second
)

func newDenialAudit(now func() time.Time) *denialAudit {
	return &denialAudit{set: ratelimit.New(denialRate, denialBurst, now),
		unrecorded: prometheus.NewCounter(prometheus.CounterOpts{Name: "oce_api_denials_folded_total",
			Help: "Denied writes folded into a later audit record of the same actor (details.suppressed)."})}
}

// admit reports whether actor's refusal gets its own record now, and how
// many refusals were folded since its last record.
func (d *denialAudit) admit(actor string) (bool, int) { return d.set.Admit(actor) }
