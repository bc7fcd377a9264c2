// Package store is the coordinator's replicated store: hashicorp/raft with
// raft-boltdb (log and stable store), a file snapshot store and a TCP
// transport, around an FSM that wraps state.Machine plus a small
// node-metadata section (each member's HTTP address). It implements the
// API's Backend (less the compute driver) and the engine's Proposer, and
// runs a callback for as long as this node is the leader.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"oce.dev/oce/coordinator/state"
)

// Defaults. The Raft timings are shorter than hashicorp/raft's (1 s, 1 s,
// 500 ms) so a leader's failure is detected sooner: with a 400 ms heartbeat
// timeout a SIGKILLed leader is replaced and the next activation completes
// in well under a second (p50), and a busy three-member cluster on a loaded
// two-core machine held its leader steady, where 300 ms did not
// (docs/PERFORMANCE.md, "Failover"). Pre-vote stays on (hashicorp/raft
// v1.7's default): a member cut off and back does not depose the leader.
const (
	DefaultHeartbeatTimeout   = 400 * time.Millisecond
	DefaultElectionTimeout    = 400 * time.Millisecond
	DefaultLeaderLeaseTimeout = 200 * time.Millisecond
	DefaultCommitTimeout      = 50 * time.Millisecond
	// DefaultApplyTimeout bounds a proposal whose context has no deadline.
	DefaultApplyTimeout = 10 * time.Second
	// DefaultSnapshotRetain is how many snapshots the file store keeps.
	DefaultSnapshotRetain = 3
	// DefaultSnapshotThreshold is the number of entries between snapshots.
	DefaultSnapshotThreshold = 8192
	// DefaultSnapshotInterval is how often raft checks the threshold.
	DefaultSnapshotInterval = 120 * time.Second
	// DefaultTrailingLogs is how many entries stay in the log after a snapshot.
	DefaultTrailingLogs = 10240
	// MaxBackupBytes bounds a restore stream.
	MaxBackupBytes = 4 << 30

	transportMaxPool = 3
	transportTimeout = 10 * time.Second
	boltOpenTimeout  = 5 * time.Second
	logCacheSize     = 512
)

// Timeouts are the Raft timings; zero fields take hashicorp/raft's defaults.
type Timeouts struct {
	Heartbeat   time.Duration
	Election    time.Duration
	LeaderLease time.Duration
	Commit      time.Duration
}

// Config configures a Store.
type Config struct {
	// NodeID is this member's stable Raft server id.
	NodeID string
	// DataDir holds raft.db and snapshots/.
	DataDir string
	// RaftBind is the TCP address the Raft transport listens on.
	RaftBind string
	// RaftAdvertise is the address peers dial; empty means RaftBind.
	RaftAdvertise string
	// HTTPAddr is this member's API address, replicated so followers can name
	// the leader's.
	HTTPAddr string
	// Bootstrap makes a node without existing state form a one-member cluster.
	Bootstrap bool
	// Timeouts are the Raft timings.
	Timeouts Timeouts
	// DisablePreVote turns hashicorp/raft's pre-vote off (it is on by
	// default): only for comparisons, see docs/PERFORMANCE.md.
	DisablePreVote bool
	// SnapshotThreshold, SnapshotInterval and TrailingLogs tune snapshots;
	// zero means the defaults above.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// Clock stamps proposals; nil means time.Now.
	Clock func() time.Time
	// OnLeader runs while this node is the leader; its context is cancelled
	// when leadership is lost or the store closes. The store waits for it to
	// return before reacting to the next leadership change.
	OnLeader func(ctx context.Context, s *Store)
	// Log receives the store's and raft's records; nil discards.
	Log *slog.Logger
	// RaftLogLevel is the minimum level of raft's own records (default info).
	RaftLogLevel slog.Level
	// RaftTLS, when set, makes the Raft transport mutual TLS.
	RaftTLS *RaftTLS
}

// Store is one member of the replicated store.
type Store struct {
	cfg   Config
	log   *slog.Logger
	clock func() time.Time

	raft  *raft.Raft
	fsm   *fsm
	logs  raft.LogStore
	trans *raft.NetworkTransport
	watch *commitWatch
	// bootLast and bootTerm name the last command entry on disk at Open:
	// until the state has applied it (or the leader replaced it), the
	// member is replaying its log and serves no reads (reads.go).
	bootLast, bootTerm uint64
	replayed           atomic.Bool
	// heartbeat is the Raft heartbeat timeout: how fresh the leader's
	// commit index must be for readiness.
	heartbeat time.Duration
	// leaderTerm is the term whose leader barrier completed on this node;
	// led is closed (and replaced) each time it is stored (WaitLeading).
	leaderTerm atomic.Uint64
	ledMu      sync.Mutex
	led        chan struct{}
	bolt       *raftboltdb.BoltStore
	gate       *gatedStable
	snaps      *raft.FileSnapshotStore

	stats stats

	cancel    context.CancelFunc
	observing sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the store under cfg.DataDir and starts Raft.
func Open(cfg Config) (_ *Store, retErr error) {
	if cfg.NodeID == "" || cfg.DataDir == "" || cfg.RaftBind == "" {
		return nil, errors.New("store: NodeID, DataDir and RaftBind are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("store: data dir: %w", err)
	}
	s := &Store{cfg: cfg, log: cfg.Log.With("component", "store"), clock: cfg.Clock, fsm: newFSM()}
	defer func() {
		if retErr != nil {
			s.closeResources()
		}
	}()

	hl := newHCLog(cfg.Log, hclogLevel(cfg.RaftLogLevel))
	var err error
	s.bolt, err = raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("store: open raft.db: %w", err)
	}
	s.gate = &gatedStable{s: s.bolt}
	logs, err := raft.NewLogCache(logCacheSize, s.bolt)
	if err != nil {
		return nil, fmt.Errorf("store: log cache: %w", err)
	}
	s.logs = logs
	s.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, DefaultSnapshotRetain, hl.Named("snapshots"))
	if err != nil {
		return nil, fmt.Errorf("store: snapshot store: %w", err)
	}
	stream, err := newStreamLayer(cfg.RaftBind, cfg.RaftAdvertise, cfg.RaftTLS)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: transportMaxPool, Timeout: transportTimeout, Logger: hl.Named("transport"),
	})

	rc := raftConfig(cfg, hl)
	s.heartbeat = rc.HeartbeatTimeout
	existing, err := raft.HasExistingState(logs, s.gate, s.snaps)
	if err != nil {
		return nil, fmt.Errorf("store: inspect state: %w", err)
	}
	s.watch = newCommitWatch(s.trans)
	s.raft, err = raft.NewRaft(rc, s.fsm, logs, s.gate, s.snaps, s.watch)
	if err != nil {
		return nil, fmt.Errorf("store: start raft: %w", err)
	}
	s.bootLast, s.bootTerm = s.lastCommand(s.raft.LastIndex())
	if cfg.Bootstrap && !existing {
		f := s.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
			ID: raft.ServerID(cfg.NodeID), Address: s.trans.LocalAddr(), Suffrage: raft.Voter,
		}}})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return nil, fmt.Errorf("store: bootstrap: %w", err)
		}
		s.log.Info("bootstrapped a one-member cluster", "raftAddr", string(s.trans.LocalAddr()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.observing.Add(1)
	go s.observeLeadership(ctx)
	return s, nil
}

func raftConfig(cfg Config, hl hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hl
	def := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	t := cfg.Timeouts
	rc.HeartbeatTimeout = def(t.Heartbeat, DefaultHeartbeatTimeout)
	rc.ElectionTimeout = def(t.Election, DefaultElectionTimeout)
	rc.LeaderLeaseTimeout = def(t.LeaderLease, DefaultLeaderLeaseTimeout)
	rc.CommitTimeout = def(t.Commit, DefaultCommitTimeout)
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	rc.PreVoteDisabled = cfg.DisablePreVote
	return rc
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l <= slog.LevelDebug:
		return hclog.Debug
	case l <= slog.LevelInfo:
		return hclog.Info
	case l <= slog.LevelWarn:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

// Close stops the leader callback, shuts Raft down and closes the files.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		if s.raft != nil {
			if err := s.raft.Shutdown().Error(); err != nil {
				s.closeErr = fmt.Errorf("store: raft shutdown: %w", err)
			}
		}
		s.observing.Wait()
		s.closeResources()
	})
	return s.closeErr
}

func (s *Store) closeResources() {
	if s.watch != nil {
		s.watch.close()
	}
	if s.trans != nil {
		_ = s.trans.Close()
		s.trans.CloseStreams()
	}
	if s.gate != nil {
		s.gate.close(func() { _ = s.bolt.Close() })
	} else if s.bolt != nil {
		_ = s.bolt.Close()
	}
}

// NodeID is this member's id.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// RaftAddr is the Raft address peers dial.
func (s *Store) RaftAddr() string { return string(s.trans.LocalAddr()) }

// HTTPAddr is this member's API address.
func (s *Store) HTTPAddr() string { return s.cfg.HTTPAddr }

// Machine returns the replicated state machine. It is the same object for the
// store's life; a restore replaces its content in place.
func (s *Store) Machine() *state.Machine { return s.fsm.Machine() }

// IsLeader reports whether this node currently believes it is the leader.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderID returns the id of the leader this node knows of, or "".
func (s *Store) LeaderID() string {
	_, id := s.raft.LeaderWithID()
	return string(id)
}

// LeaderHTTPAddr returns the leader's HTTP address, or "" when unknown.
func (s *Store) LeaderHTTPAddr() string {
	_, id := s.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	if string(id) == s.cfg.NodeID {
		return s.cfg.HTTPAddr
	}
	return s.fsm.httpAddr(string(id))
}

func (s *Store) notLeader(unknown bool) *NotLeaderError {
	return &NotLeaderError{LeaderID: s.LeaderID(), LeaderHTTP: s.LeaderHTTPAddr(), Unknown: unknown}
}
