package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Encode builds the bytes of one log entry: a Command envelope carrying the
// leader-stamped time (normalized to UTC), the actor and the JSON payload.
func Encode(typ string, t time.Time, actor string, payload any) ([]byte, error) {
	return EncodeStamped(typ, t, actor, nil, payload)
}

// EncodeStamped is Encode for a command that may carry an idempotency stamp.
func EncodeStamped(typ string, t time.Time, actor string, idem *Idempotency, payload any) ([]byte, error) {
	p, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s payload: %w", ErrInvalid, typ, err)
	}
	b, err := json.Marshal(Command{Type: typ, Time: t.UTC().Round(0), Actor: actor, Payload: p, Idempotency: idem})
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s: %w", ErrInvalid, typ, err)
	}
	return b, nil
}

// ApplyBytes strictly decodes one log entry (unknown fields or trailing data
// are ErrInvalid) and applies it.
func (m *Machine) ApplyBytes(entry []byte) (any, error) {
	var c Command
	if err := decodeStrict(entry, &c); err != nil {
		return nil, fmt.Errorf("%w: entry: %w", ErrInvalid, err)
	}
	return m.ApplyCommand(c)
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// ApplyCommand applies one decoded log entry. It returns the command's
// result (a copy of the created or changed entity; the command table,
// table.go, declares each command's result type) or an error wrapping one of
// the sentinels in commands.go. A failed command changes nothing.
func (m *Machine) ApplyCommand(c Command) (any, error) {
	if c.Time.IsZero() {
		return nil, fmt.Errorf("%w: %s: entry has no time", ErrInvalid, c.Type)
	}
	c.Time = c.Time.UTC().Round(0)
	h, ok := handlers[c.Type]
	if !ok {
		return nil, fmt.Errorf("%w: unknown command type %q", ErrInvalid, c.Type)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.Idempotency != nil {
		res, changed, err := applyStamped(&m.d, c, h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Type, err)
		}
		if changed {
			m.bump()
		}
		return res, nil
	}
	res, err := h(&m.d, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Type, err)
	}
	m.bump()
	if changesIdentities[c.Type] {
		m.idGen++
	}
	return res, nil
}

// handler validates a command completely before it mutates anything, so an
// error always leaves the state unchanged.
type handler func(d *data, c Command) (any, error)
