package api

import (
	"crypto/rand"
	"encoding/hex"
)

// newID mints a 128-bit random hex id on the leader; Apply never does.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
