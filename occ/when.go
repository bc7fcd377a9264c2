package occ

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrBadTime: a --since or --until value is none of the forms parseWhen
// accepts.
var ErrBadTime = errors.New("not a time")

// whenForms lists the accepted forms of --since and --until for help and
// errors (never Go's layout string).
const whenForms = "RFC 3339 (2026-12-01T09:30:00Z), a date (2026-12-01, local midnight), today, yesterday " +
	"(local midnight), or a duration ago (90m, 24h, 7d)"

// parseWhen reads a --since/--until value relative to now: RFC 3339, a
// plain date or today/yesterday (midnight in now's location), or a
// duration before now (Go's units plus d for days). "" is no bound.
func parseWhen(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	midnight := func(t time.Time) time.Time {
		y, m, d := t.Date()
		return time.Date(y, m, d, 0, 0, 0, 0, now.Location())
	}
	switch strings.ToLower(v) {
	case "today":
		return midnight(now), nil
	case "yesterday":
		return midnight(now.AddDate(0, 0, -1)), nil
	}
	if d, ok := parseAgo(v); ok {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%w: %q is a duration into the future; use a duration ago like 24h, or %s", ErrBadTime, v, whenForms)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, now.Location()); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: %q; use %s", ErrBadTime, v, whenForms)
}

// parseAgo reads a Go duration or a whole number of days ("7d").
func parseAgo(v string) (time.Duration, bool) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, false
		}
		return time.Duration(days) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(v)
	return d, err == nil
}
