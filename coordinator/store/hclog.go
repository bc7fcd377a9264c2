package store

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogHCLog adapts raft's hclog interface onto log/slog so raft's records
// are JSON lines like everything else.
type slogHCLog struct {
	l     *slog.Logger
	name  string
	args  []any
	level hclog.Level
}

func newHCLog(l *slog.Logger, level hclog.Level) hclog.Logger {
	return &slogHCLog{l: l.With("component", "raft"), level: level}
}

func (h *slogHCLog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel || level < h.level {
		return
	}
	var sl slog.Level
	switch {
	case level <= hclog.Debug:
		sl = slog.LevelDebug
	case level == hclog.Info:
		sl = slog.LevelInfo
	case level == hclog.Warn:
		sl = slog.LevelWarn
	default:
		sl = slog.LevelError
	}
	all := make([]any, 0, len(h.args)+len(args)+2)
	if h.name != "" {
		all = append(all, "name", h.name)
	}
	all = append(all, h.args...)
	all = append(all, args...)
	for i := 0; i+1 < len(all); i += 2 {
		if k, ok := all[i].(string); ok && ownKeys[k] {
			all[i] = "raft_" + k
		}
		all[i+1] = plain(all[i+1])
	}
	h.l.Log(context.Background(), sl, msg, all...)
}

// ownKeys are keys oce's loggers already carry; raft's own arguments of
// the same name ("node": raft's "Node at <addr> [state]") are renamed so a
// record never repeats a key.
var ownKeys = map[string]bool{"node": true, "component": true}

// plain renders raft's argument values the way hclog would: formats
// expanded, Stringers and errors as text.
func plain(v any) (out any) {
	defer func() {
		if recover() != nil { // a typed nil Stringer or error
			out = fmt.Sprintf("%v", v)
		}
	}()
	switch x := v.(type) {
	case hclog.Format:
		if len(x) > 0 {
			if f, ok := x[0].(string); ok {
				return fmt.Sprintf(f, x[1:]...)
			}
		}
		return fmt.Sprint(x...)
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	}
	return v
}

func (h *slogHCLog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *slogHCLog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *slogHCLog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *slogHCLog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *slogHCLog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }
func (h *slogHCLog) IsTrace() bool                 { return h.level <= hclog.Trace }
func (h *slogHCLog) IsDebug() bool                 { return h.level <= hclog.Debug }
func (h *slogHCLog) IsInfo() bool                  { return h.level <= hclog.Info }
func (h *slogHCLog) IsWarn() bool                  { return h.level <= hclog.Warn }
func (h *slogHCLog) IsError() bool                 { return h.level <= hclog.Error }
func (h *slogHCLog) ImpliedArgs() []any            { return h.args }
func (h *slogHCLog) Name() string                  { return h.name }
func (h *slogHCLog) SetLevel(level hclog.Level)    { h.level = level }
func (h *slogHCLog) GetLevel() hclog.Level         { return h.level }

func (h *slogHCLog) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any{}, h.args...), args...)
	return &c
}

func (h *slogHCLog) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *slogHCLog) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *slogHCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *slogHCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Info(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
