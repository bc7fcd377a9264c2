package upfront

import (
	"context"
	"log/slog"
)

// LogEvent is the message of the check's log record.
const LogEvent = "model_probe.upfront_check"

// Attrs are the record's allow-listed attributes: outcome, skip reason,
// status, code and the closed-set 401 diagnostics. Never a key, header
// value or body text.
func (r Result) Attrs() []slog.Attr {
	a := []slog.Attr{slog.String("outcome", string(r.Outcome))}
	add := func(k, v string) {
		if v != "" {
			a = append(a, slog.String(k, v))
		}
	}
	add("skipReason", string(r.SkipReason))
	if r.Status != 0 {
		a = append(a, slog.Int("status", r.Status))
	}
	add("code", string(r.Code))
	add("providerCode", r.ProviderCode)
	add("responseHeaderMarker", r.ResponseHeaderMarker)
	add("bodyShape", string(r.BodyShape))
	add("providerErrorCode", r.ProviderErrorCode)
	add("providerErrorType", r.ProviderErrorType)
	return a
}

// Log writes one record for r.
func Log(ctx context.Context, l *slog.Logger, r Result) {
	lvl := slog.LevelInfo
	if r.Failed() {
		lvl = slog.LevelError
	}
	l.LogAttrs(ctx, lvl, LogEvent, r.Attrs()...)
}
