package store

import (
	"sync"

	"github.com/hashicorp/raft"
)

// gatedStable guards the stable store against raft's transport goroutines,
// which keep serving heartbeats on already-open connections for a moment
// after Raft.Shutdown and panic when a term write fails. Once the store is
// closed, writes are dropped (the node is gone; nothing it answers counts)
// and reads fail.
type gatedStable struct {
	mu     sync.RWMutex
	closed bool
	s      raft.StableStore
}

func (g *gatedStable) Set(k, v []byte) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil
	}
	return g.s.Set(k, v)
}

func (g *gatedStable) Get(k []byte) ([]byte, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, ErrClosed
	}
	return g.s.Get(k)
}

func (g *gatedStable) SetUint64(k []byte, v uint64) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil
	}
	return g.s.SetUint64(k, v)
}

func (g *gatedStable) GetUint64(k []byte) (uint64, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return 0, ErrClosed
	}
	return g.s.GetUint64(k)
}

// close runs f (closing the underlying database) once no write is in flight.
func (g *gatedStable) close(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		f()
	}
}
