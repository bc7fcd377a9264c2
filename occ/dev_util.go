package occ

import (
	"crypto/rand"
	"encoding/hex"
)

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
