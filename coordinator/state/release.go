package state

import (
	"fmt"
	"slices"
)

// A new leader's engine frees the claims of earlier engines at once
// (ReleaseClaims in commands.go) instead of waiting out their leases.

func applyReleaseClaims(d *data, c Command, p ReleaseClaims) ([]string, error) {
	if p.Keep == "" {
		return nil, fmt.Errorf("%w: keep is required", ErrInvalid)
	}
	var ids []string
	for id := range d.open {
		if w := d.work[id]; w.State == WorkClaimed && w.Owner != p.Keep {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := release(d.work[id], WorkQueued, c.Time)
		w.AvailableAt = c.Time
		w.LastCode, w.LastDetail = CodeLeaderChanged, ""
		d.putWork(w)
	}
	return ids, nil
}

// ForeignClaims counts claimed work whose owner is not keep (the claims a
// ReleaseClaims{Keep: keep} would release).
func (m *Machine) ForeignClaims(keep string) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for id := range m.d.open {
		if w := m.d.work[id]; w.State == WorkClaimed && w.Owner != keep {
			n++
		}
	}
	return n
}
