package logging

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// prettyTime is how Pretty shows a record's time: UTC to the millisecond.
const prettyTime = "2006-01-02T15:04:05.000Z07:00"

// Pretty renders one JSON log record for people: its time, level and
// message, then the other fields as key=value in the record's own order
// ("2026-12-04T18:40:33.107Z WARN  nodehost exited component=harnessd
// status=\"exit 1\""). Level is the record's level in lower case ("" when
// it has none; "warning" reads "warn"). ok is false for a line that is not one JSON object; callers
// show such a line unchanged.
func Pretty(line []byte) (text, level string, ok bool) {
	type field struct {
		key string
		raw json.RawMessage
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", "", false
	}
	var fields []field
	var when, msg string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", "", false
		}
		k, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", "", false
		}
		s, isString := jsonString(raw)
		switch {
		case isString && when == "" && (k == "time" || k == "timestamp" || k == "ts"):
			when = s
		case isString && level == "" && k == "level":
			level = strings.ToLower(s)
		case isString && msg == "" && (k == "msg" || k == "message"):
			msg = s
		default:
			fields = append(fields, field{k, raw})
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return "", "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", false // more than one value on the line
	}
	var b strings.Builder
	sep := func() {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
	}
	if when != "" {
		if t, err := time.Parse(time.RFC3339Nano, when); err == nil {
			when = t.UTC().Format(prettyTime)
		}
		b.WriteString(quoteIfNeeded(when))
	}
	if level != "" {
		sep()
		if level == "warning" {
			level = "warn"
		}
		b.WriteString(padRight(quoteIfNeeded(strings.ToUpper(level)), 5))
	}
	if msg != "" {
		sep()
		b.WriteString(quoteControl(msg))
	}
	for _, f := range fields {
		sep()
		b.WriteString(quoteIfNeeded(f.key))
		b.WriteByte('=')
		if s, ok := jsonString(f.raw); ok {
			b.WriteString(quoteIfNeeded(s))
			continue
		}
		var c bytes.Buffer
		if json.Compact(&c, f.raw) == nil {
			b.Write(c.Bytes())
		} else {
			b.Write(f.raw)
		}
	}
	return b.String(), level, true
}

func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// quoteControl quotes a message with control characters: a record cannot
// forge a second line. Its spaces stay (a message is not a key=value pair).
func quoteControl(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// quoteIfNeeded quotes a value that would not read as one token: empty,
// or with spaces, quotes, '=' or control characters.
func quoteIfNeeded(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '"' || r == '=' || unicode.IsSpace(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

func padRight(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(" ", n-len(s))
}
