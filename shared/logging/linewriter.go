package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxLineBytes bounds one child output line; the rest of a longer line is
// dropped and the record is marked truncated.
const MaxLineBytes = 16 << 10

// ChildOutputMsg is the msg of every record LineWriter writes.
const ChildOutputMsg = "child output"

// ErrClosed is returned by writes to a closed LineWriter.
var ErrClosed = errors.New("logging: line writer closed")

// LineWriter returns a writer for a child's output stream (normally stderr)
// that turns each line into one record {msg: "child output", stream, line}
// after scrubbing credentials with red (nil: the process-wide Redactor).
// A line that is a JSON object is parsed and only its level, target or
// subsystem, and message are kept: Codex with LOG_FORMAT=json writes
// {level, target, fields:{message}}, OpenClaw's JSON console style
// {time, level, subsystem, message}. Lines are
// bounded by MaxLineBytes. Close flushes a final unterminated line.
func LineWriter(logger *slog.Logger, stream string, red *Redactor) io.WriteCloser {
	if red == nil {
		red = defaultRedactor
	}
	return &lineWriter{log: logger, stream: stream, red: red}
}

type lineWriter struct {
	mu        sync.Mutex
	log       *slog.Logger
	stream    string
	red       *Redactor
	buf       []byte
	truncated bool // the line in buf already lost bytes
	closed    bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		w.appendBounded(chunk)
		if i < 0 {
			break
		}
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) appendBounded(chunk []byte) {
	room := MaxLineBytes - len(w.buf)
	if len(chunk) > room {
		chunk = chunk[:max(room, 0)]
		w.truncated = true
	}
	w.buf = append(w.buf, chunk...)
}

func (w *lineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if len(w.buf) > 0 || w.truncated {
		w.emit()
	}
	w.closed = true
	return nil
}

func (w *lineWriter) emit() {
	line := strings.TrimSuffix(string(w.buf), "\r")
	truncated := w.truncated
	w.buf = w.buf[:0]
	w.truncated = false
	if truncated {
		// Cut at a rune boundary so the record stays valid UTF-8.
		for i := 0; i < utf8.UTFMax-1 && len(line) > 0; i++ {
			if r, size := utf8.DecodeLastRuneInString(line); r != utf8.RuneError || size != 1 {
				break
			}
			line = line[:len(line)-1]
		}
	}
	if strings.TrimSpace(line) == "" && !truncated {
		return
	}
	attrs := []slog.Attr{slog.String("stream", w.stream)}
	level := slog.LevelInfo
	if !truncated && strings.HasPrefix(line, "{") {
		if rec, ok := parseJSONLine(line); ok {
			level = rec.level
			if rec.rawLevel != "" {
				attrs = append(attrs, slog.String("childLevel", rec.rawLevel))
			}
			if rec.target != "" {
				attrs = append(attrs, slog.String("target", w.red.Scrub(rec.target)))
			}
			if rec.subsystem != "" {
				attrs = append(attrs, slog.String("subsystem", rec.subsystem))
			}
			line = rec.message
		}
	}
	attrs = append(attrs, slog.String("line", w.red.Scrub(line)))
	if truncated {
		attrs = append(attrs, slog.Bool("truncated", true))
	}
	w.log.LogAttrs(context.Background(), level, ChildOutputMsg, attrs...)
}

type jsonLine struct {
	level     slog.Level
	rawLevel  string
	target    string
	subsystem string
	message   string
}

var (
	tokenRe     = phaseRe // lower-case token shape; upper-cased levels are lowered first
	subsystemRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./:-]{0,63}$`)
)

// parseJSONLine reads the allow-listed fields of a structured child log line.
func parseJSONLine(line string) (jsonLine, bool) {
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return jsonLine{}, false
	}
	var out jsonLine
	if lv, ok := m["level"].(string); ok {
		l := strings.ToLower(lv)
		if tokenRe.MatchString(l) {
			out.rawLevel = l
		}
		switch l {
		case "error", "fatal":
			out.level = slog.LevelError
		case "warn", "warning":
			out.level = slog.LevelWarn
		case "debug", "trace":
			out.level = slog.LevelDebug
		default:
			out.level = slog.LevelInfo
		}
	}
	if t, ok := m["target"].(string); ok && len(t) <= 256 {
		out.target = t
	}
	if sub, ok := m["subsystem"].(string); ok && subsystemRe.MatchString(sub) {
		out.subsystem = sub
	}
	switch {
	case isString(m["message"]):
		out.message = m["message"].(string)
	case isString(m["msg"]):
		out.message = m["msg"].(string)
	default:
		if f, ok := m["fields"].(map[string]any); ok && isString(f["message"]) {
			out.message = f["message"].(string)
		}
	}
	return out, true
}

func isString(v any) bool { _, ok := v.(string); return ok }
