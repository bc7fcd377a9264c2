package ocproto

import "time"

// Reconnect backoff bounds of the reference client (shared/backoff doubles
// between them).
const (
	ReconnectMin = time.Second
	ReconnectMax = 30 * time.Second
)
