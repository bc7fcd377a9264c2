package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"sync"

	"github.com/hashicorp/raft"

	"oce.dev/oce/coordinator/state"
)

// metaPrefix marks a log entry that carries node metadata instead of a
// state.Command. Commands are JSON objects and never start with this byte.
const metaPrefix byte = 0x01

// snapshotMagic opens every snapshot and backup this store writes.
const snapshotMagic = "OCESNAP1"

// maxMetaSection bounds the node-metadata section of a snapshot.
const maxMetaSection = 1 << 20

// metaOp is a node-metadata log entry.
type metaOp struct {
	Op       string            `json:"op"` // set | delete | replace
	ID       string            `json:"id,omitempty"`
	HTTPAddr string            `json:"httpAddr,omitempty"`
	Nodes    map[string]string `json:"nodes,omitempty"`
}

// snapshotMeta is the store's own section of a snapshot.
type snapshotMeta struct {
	Version int               `json:"version"`
	Index   uint64            `json:"index"`
	Nodes   map[string]string `json:"nodes"`
}

// applyResult is what fsm.Apply returns through raft's ApplyFuture.
type applyResult struct {
	val any
	err error
}

// fsm wraps the state machine with the store's node-metadata section (node
// id → HTTP address), snapshotting both.
type fsm struct {
	mu      sync.RWMutex
	machine *state.Machine
	nodes   map[string]string
	index   uint64        // raft index of the last entry applied to the FSM
	moved   chan struct{} // closed and replaced whenever index moves
}

func newFSM() *fsm {
	return &fsm{machine: state.NewMachine(), nodes: map[string]string{}, moved: make(chan struct{})}
}

// setIndex records the applied index and wakes its waiters; f.mu is held.
func (f *fsm) setIndex(i uint64) {
	f.index = i
	close(f.moved)
	f.moved = make(chan struct{})
}

// applied returns the applied index and a channel closed when it next moves.
func (f *fsm) applied() (uint64, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index, f.moved
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setIndex(l.Index)
	if len(l.Data) > 0 && l.Data[0] == metaPrefix {
		return applyResult{err: f.applyMeta(l.Data[1:])}
	}
	v, err := f.machine.ApplyBytes(l.Data)
	return applyResult{val: v, err: err}
}

func (f *fsm) applyMeta(b []byte) error {
	var op metaOp
	if err := json.Unmarshal(b, &op); err != nil {
		return fmt.Errorf("%w: node metadata: %v", ErrInvalidMember, err)
	}
	switch op.Op {
	case "set", "delete":
		if op.ID == "" || (op.Op == "set" && op.HTTPAddr == "") {
			return fmt.Errorf("%w: node metadata %s needs id and address", ErrInvalidMember, op.Op)
		}
	}
	switch op.Op {
	case "set":
		f.nodes[op.ID] = op.HTTPAddr
	case "delete":
		delete(f.nodes, op.ID)
	case "replace":
		f.nodes = maps.Clone(op.Nodes)
		if f.nodes == nil {
			f.nodes = map[string]string{}
		}
	default:
		return fmt.Errorf("%w: node metadata op %q", ErrInvalidMember, op.Op)
	}
	return nil
}

// Snapshot implements raft.FSM. Raft calls it on the FSM goroutine, so no
// Apply runs concurrently; the state is captured here, written by Persist.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return f.capture()
}

// capture renders the FSM as a snapshot: header (magic, length, store
// section) and the state machine's body, kept apart to avoid copying the body.
func (f *fsm) capture() (partsSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	body, err := f.machine.MarshalSnapshot()
	if err != nil {
		return partsSnapshot{}, fmt.Errorf("marshal state: %w", err)
	}
	head, err := snapshotHeader(snapshotMeta{Version: 1, Index: f.index, Nodes: f.nodes})
	if err != nil {
		return partsSnapshot{}, err
	}
	return partsSnapshot{head: head, body: body}, nil
}

// encode renders the FSM as one byte slice.
func (f *fsm) encode() ([]byte, error) {
	p, err := f.capture()
	if err != nil {
		return nil, err
	}
	return append(p.head, p.body...), nil
}

func snapshotHeader(m snapshotMeta) ([]byte, error) {
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 0, len(snapshotMagic)+4+len(mb))
	head = append(head, snapshotMagic...)
	head = binary.BigEndian.AppendUint32(head, uint32(len(mb)))
	return append(head, mb...), nil
}

// decodeSnapshot splits snapshot bytes into the store section and the state
// machine body.
func decodeSnapshot(b []byte) (snapshotMeta, []byte, error) {
	var m snapshotMeta
	if len(b) < len(snapshotMagic)+4 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return m, nil, fmt.Errorf("%w: missing %s header", ErrInvalidBackup, snapshotMagic)
	}
	b = b[len(snapshotMagic):]
	n := binary.BigEndian.Uint32(b[:4])
	b = b[4:]
	if n > maxMetaSection || int(n) > len(b) {
		return m, nil, fmt.Errorf("%w: bad metadata length %d", ErrInvalidBackup, n)
	}
	if err := json.Unmarshal(b[:n], &m); err != nil {
		return m, nil, fmt.Errorf("%w: metadata: %v", ErrInvalidBackup, err)
	}
	if m.Version != 1 {
		return m, nil, fmt.Errorf("%w: unsupported version %d", ErrInvalidBackup, m.Version)
	}
	if m.Nodes == nil {
		m.Nodes = map[string]string{}
	}
	return m, b[n:], nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	m, body, err := decodeSnapshot(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// In place: the engine and API keep the Machine (and its Changed
	// channel); RestoreSnapshot decodes fully before replacing anything.
	if err := f.machine.RestoreSnapshot(body); err != nil {
		return fmt.Errorf("%w: state: %v", ErrInvalidBackup, err)
	}
	f.nodes = m.Nodes
	f.setIndex(m.Index)
	return nil
}

// Machine returns the state machine; a restore replaces its content in place.
func (f *fsm) Machine() *state.Machine { return f.machine }

func (f *fsm) httpAddr(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.nodes[id]
}

func (f *fsm) nodesCopy() map[string]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.nodes)
}

// digest returns the applied index and the state digest, read atomically.
func (f *fsm) digest() (uint64, string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index, f.machine.Digest()
}

// partsSnapshot is a captured raft.FSMSnapshot.
type partsSnapshot struct{ head, body []byte }

// Size is the snapshot's length in bytes.
func (p partsSnapshot) Size() int64 { return int64(len(p.head) + len(p.body)) }

// WriteTo writes the snapshot to w.
func (p partsSnapshot) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(p.head)
	if err != nil {
		return int64(n), err
	}
	m, err := w.Write(p.body)
	return int64(n + m), err
}

// Reader returns the snapshot as a stream.
func (p partsSnapshot) Reader() io.Reader {
	return io.MultiReader(bytes.NewReader(p.head), bytes.NewReader(p.body))
}

func (p partsSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := p.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (p partsSnapshot) Release() {}
