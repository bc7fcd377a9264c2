package logging

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
)

// maxAnyDepth bounds the walk over structured (KindAny) values.
const maxAnyDepth = 16

// New returns a JSON logger writing one record per line to w: time, level,
// msg, component and the record's fields. Every record passes through a
// redacting handler backed by the process-wide Redactor (see Scrub).
func New(w io.Writer, level slog.Leveler, component string) *slog.Logger {
	return NewWithOptions(w, Options{Level: level, Component: component})
}

// Options configure NewWithOptions.
type Options struct {
	// Level is the minimum level; nil means info.
	Level slog.Leveler
	// Component is added to every record as "component" when set.
	Component string
	// Redactor scrubs records; nil means the process-wide one.
	Redactor *Redactor
	// OmitTime drops the time field (golden-file tests).
	OmitTime bool
}

// NewWithOptions is New with every knob.
func NewWithOptions(w io.Writer, o Options) *slog.Logger {
	ho := &slog.HandlerOptions{Level: o.Level}
	if o.OmitTime {
		ho.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	l := slog.New(NewRedactingHandler(slog.NewJSONHandler(w, ho), o.Redactor))
	if o.Component != "" {
		l = l.With("component", o.Component)
	}
	return l
}

// RedactingHandler wraps a slog.Handler and removes credentials before the
// inner handler sees a record: values of sensitive keys (SensitiveKey) become
// Redacted, and every string, message and error text is scrubbed by its
// Redactor. It never panics: a record that cannot be processed is replaced by
// a fixed one.
type RedactingHandler struct {
	inner slog.Handler
	red   *Redactor
}

// NewRedactingHandler wraps inner; a nil red means the process-wide Redactor.
func NewRedactingHandler(inner slog.Handler, red *Redactor) *RedactingHandler {
	if red == nil {
		red = defaultRedactor
	}
	return &RedactingHandler{inner: inner, red: red}
}

// Enabled implements slog.Handler.
func (h *RedactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h *RedactingHandler) Handle(ctx context.Context, r slog.Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			fallback := slog.NewRecord(r.Time, r.Level, "log record dropped: redaction failed", r.PC)
			err = h.inner.Handle(ctx, fallback)
		}
	}()
	out := slog.NewRecord(r.Time, r.Level, h.red.Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a, 0))
		return true
	})
	return h.inner.Handle(ctx, out)
}

// WithAttrs implements slog.Handler; the attributes are redacted once here.
func (h *RedactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		red = append(red, h.safeAttr(a))
	}
	return &RedactingHandler{inner: h.inner.WithAttrs(red), red: h.red}
}

// WithGroup implements slog.Handler.
func (h *RedactingHandler) WithGroup(name string) slog.Handler {
	return &RedactingHandler{inner: h.inner.WithGroup(name), red: h.red}
}

func (h *RedactingHandler) safeAttr(a slog.Attr) (out slog.Attr) {
	defer func() {
		if recover() != nil {
			out = slog.String(a.Key, Redacted)
		}
	}()
	return h.attr(a, 0)
}

func (h *RedactingHandler) attr(a slog.Attr, depth int) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool, slog.KindDuration, slog.KindTime:
		// Numbers and flags are never credentials, even under a key like maxTokens.
		return slog.Attr{Key: a.Key, Value: v}
	case slog.KindGroup:
		if depth >= maxAnyDepth {
			return slog.String(a.Key, Redacted)
		}
		gs := v.Group()
		out := make([]slog.Attr, 0, len(gs))
		for _, g := range gs {
			out = append(out, h.attr(g, depth+1))
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	if SensitiveKey(a.Key) {
		return slog.String(a.Key, Redacted)
	}
	switch v.Kind() {
	case slog.KindString:
		if LooksLikeSecret(v.String()) {
			return slog.String(a.Key, Redacted)
		}
		return slog.String(a.Key, h.red.Scrub(v.String()))
	case slog.KindAny:
		return slog.Any(a.Key, h.anyValue(v.Any()))
	default:
		return slog.String(a.Key, h.red.Scrub(v.String()))
	}
}

// anyValue turns an arbitrary value into a redacted, JSON-shaped value.
func (h *RedactingHandler) anyValue(x any) any {
	switch t := x.(type) {
	case nil:
		return nil
	case error:
		return h.red.Scrub(t.Error())
	case fmt.Stringer:
		return h.red.Scrub(t.String())
	case []byte:
		return h.red.Scrub(string(t))
	}
	b, err := json.Marshal(x)
	if err != nil {
		return h.red.Scrub(fmt.Sprintf("%+v", x))
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return Redacted
	}
	return h.walk(generic, 0)
}

func (h *RedactingHandler) walk(x any, depth int) any {
	if depth >= maxAnyDepth {
		return Redacted
	}
	switch t := x.(type) {
	case string:
		return h.red.Scrub(t)
	case map[string]any:
		for k, v := range t {
			switch v.(type) {
			case float64, bool, nil:
			default:
				if SensitiveKey(k) {
					t[k] = Redacted
					continue
				}
			}
			t[k] = h.walk(v, depth+1)
		}
		return t
	case []any:
		for i, v := range t {
			t[i] = h.walk(v, depth+1)
		}
		return t
	default:
		return t
	}
}
