package store

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/hashicorp/raft"
)

// Member is one Raft server of the cluster.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr,omitempty"`
	Suffrage string `json:"suffrage"` // voter | nonvoter | staging
	Leader   bool   `json:"leader"`
}

// ClusterInfo is what GET /v1/cluster reports, as seen by the answering node.
type ClusterInfo struct {
	// NodeID is the answering node.
	NodeID string `json:"nodeId"`
	// State is the answering node's Raft state: Leader, Follower, Candidate.
	State string `json:"state"`
	// LeaderID and LeaderHTTP name the leader this node knows of.
	LeaderID   string   `json:"leaderId,omitempty"`
	LeaderHTTP string   `json:"leaderHttp,omitempty"`
	Term       uint64   `json:"term"`
	LastIndex  uint64   `json:"lastIndex"`
	Commit     uint64   `json:"commitIndex"`
	Members    []Member `json:"members"`
	// LastApplied is the Raft index of the last entry applied to this node's
	// state, and Digest the state's digest at exactly that index: two nodes
	// with equal LastApplied must report equal Digests.
	LastApplied uint64 `json:"lastApplied"`
	Digest      string `json:"digest"`
}

// Cluster implements the API Backend's cluster report (a ClusterInfo).
func (s *Store) Cluster(ctx context.Context) (any, error) {
	return s.ClusterInfo(ctx)
}

// ClusterInfo reports the membership and this node's Raft and state
// position. Any node answers from its own view.
func (s *Store) ClusterInfo(ctx context.Context) (ClusterInfo, error) {
	f := s.raft.GetConfiguration()
	if err := wait(ctx, f); err != nil {
		return ClusterInfo{}, s.raftErr(err, false)
	}
	leaderAddr, leaderID := s.raft.LeaderWithID()
	nodes := s.fsm.nodesCopy()
	info := ClusterInfo{
		NodeID:     s.cfg.NodeID,
		State:      s.raft.State().String(),
		LeaderID:   string(leaderID),
		LeaderHTTP: s.LeaderHTTPAddr(),
		Term:       s.raft.CurrentTerm(),
		LastIndex:  s.raft.LastIndex(),
		Commit:     s.raft.CommitIndex(),
	}
	for _, srv := range f.Configuration().Servers {
		m := Member{ID: string(srv.ID), RaftAddr: string(srv.Address), HTTPAddr: nodes[string(srv.ID)],
			Suffrage: suffrage(srv.Suffrage), Leader: srv.ID == leaderID && srv.Address == leaderAddr}
		if m.ID == s.cfg.NodeID && m.HTTPAddr == "" {
			m.HTTPAddr = s.cfg.HTTPAddr
		}
		info.Members = append(info.Members, m)
	}
	sort.Slice(info.Members, func(i, j int) bool { return info.Members[i].ID < info.Members[j].ID })
	info.LastApplied, info.Digest = s.fsm.digest()
	return info, nil
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	default:
		return "staging"
	}
}

// Join adds (or re-adds) a voter and records its HTTP address. It is
// idempotent: a member already present with the same id and Raft address
// only has its HTTP address refreshed. Leader only.
func (s *Store) Join(ctx context.Context, id, raftAddr, httpAddr string) error {
	if err := validMember(id, raftAddr, httpAddr); err != nil {
		return err
	}
	if s.raft.State() != raft.Leader {
		return s.notLeader(false)
	}
	f := s.raft.GetConfiguration()
	if err := wait(ctx, f); err != nil {
		return s.raftErr(err, false)
	}
	present := false
	for _, srv := range f.Configuration().Servers {
		sameID, sameAddr := string(srv.ID) == id, string(srv.Address) == raftAddr
		switch {
		case sameID && sameAddr:
			present = true
		case sameID || sameAddr:
			// A reused id or address: remove the stale entry first.
			if err := wait(ctx, s.raft.RemoveServer(srv.ID, 0, applyTimeout(ctx))); err != nil {
				return s.raftErr(err, true)
			}
			s.log.Info("removed stale member before join", "member", string(srv.ID))
		}
	}
	if err := s.applyMeta(ctx, metaOp{Op: "set", ID: id, HTTPAddr: httpAddr}); err != nil {
		return err
	}
	if present {
		return nil
	}
	if err := wait(ctx, s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, applyTimeout(ctx))); err != nil {
		return s.raftErr(err, true)
	}
	s.log.Info("member joined", "member", id, "raftAddr", raftAddr)
	return nil
}

// Remove removes a member and forgets its HTTP address. Leader only;
// removing the leader itself makes it step down.
func (s *Store) Remove(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty id", ErrInvalidMember)
	}
	if s.raft.State() != raft.Leader {
		return s.notLeader(false)
	}
	if _, ok, err := s.member(ctx, id); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: no member %q", ErrInvalidMember, id)
	}
	if err := s.applyMeta(ctx, metaOp{Op: "delete", ID: id}); err != nil {
		return err
	}
	if err := wait(ctx, s.raft.RemoveServer(raft.ServerID(id), 0, applyTimeout(ctx))); err != nil {
		return s.raftErr(err, true)
	}
	s.log.Info("member removed", "member", id)
	return nil
}

// TransferLeadership hands leadership to member id, or to the most
// up-to-date follower when id is empty. Leader only.
func (s *Store) TransferLeadership(ctx context.Context, id string) error {
	if s.raft.State() != raft.Leader {
		return s.notLeader(false)
	}
	if id == "" {
		return s.transferErr(wait(ctx, s.raft.LeadershipTransfer()))
	}
	if id == s.cfg.NodeID {
		return fmt.Errorf("%w: %q is already the leader", ErrInvalidMember, id)
	}
	srv, ok, err := s.member(ctx, id)
	if err != nil {
		return err
	}
	if !ok || srv.Suffrage != raft.Voter {
		return fmt.Errorf("%w: no voter %q", ErrInvalidMember, id)
	}
	return s.transferErr(wait(ctx, s.raft.LeadershipTransferToServer(srv.ID, srv.Address)))
}

func (s *Store) transferErr(err error) error {
	if err == nil {
		return nil
	}
	return s.raftErr(err, false)
}

func (s *Store) member(ctx context.Context, id string) (raft.Server, bool, error) {
	f := s.raft.GetConfiguration()
	if err := wait(ctx, f); err != nil {
		return raft.Server{}, false, s.raftErr(err, false)
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == id {
			return srv, true, nil
		}
	}
	return raft.Server{}, false, nil
}

func validMember(id, raftAddr, httpAddr string) error {
	if id == "" || len(id) > 128 || strings.ContainsAny(id, " \t\r\n/") {
		return fmt.Errorf("%w: bad id %q", ErrInvalidMember, id)
	}
	for name, a := range map[string]string{"raftAddr": raftAddr, "httpAddr": httpAddr} {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("%w: bad %s %q", ErrInvalidMember, name, a)
		}
	}
	return nil
}
