package state

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type cmdCase struct {
	name    string
	setup   func(f *fx)
	typ     Named
	payload func(f *fx) any
	wantErr error
	check   func(t *testing.T, f *fx, res any)
}

func strp(s string) *string { return &s }

// rawName names a command the table does not declare.
type rawName string

func (n rawName) Name() string { return string(n) }

func TestCommands(t *testing.T) {
	later := func(f *fx) { f.now = f.now.Add(time.Minute) }
	cases := []cmdCase{
		// Namespaces.
		{name: "namespace ok", typ: CmdCreateNamespace, payload: func(*fx) any { return CreateNamespace{ID: "ns3", Name: "three"} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, Namespace{ID: "ns3", Name: "three", CreatedAt: t0}, res)
				require.Len(t, f.m.Namespaces(), 3)
			}},
		{name: "namespace id taken", typ: CmdCreateNamespace, payload: func(*fx) any { return CreateNamespace{ID: "ns1", Name: "x"} }, wantErr: ErrConflict},
		{name: "namespace name taken", typ: CmdCreateNamespace, payload: func(*fx) any { return CreateNamespace{ID: "ns3", Name: "one"} }, wantErr: ErrConflict},
		{name: "namespace name missing", typ: CmdCreateNamespace, payload: func(*fx) any { return CreateNamespace{ID: "ns3"} }, wantErr: ErrInvalid},
		// Configurations.
		{name: "configuration update bumps generation", setup: later, typ: CmdPutConfiguration,
			payload: func(*fx) any {
				return PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg", Document: json.RawMessage(`{ "b" : 2 }`)}
			},
			check: func(t *testing.T, f *fx, res any) {
				c := res.(Configuration)
				require.EqualValues(t, 2, c.Generation)
				require.JSONEq(t, `{"b":2}`, string(c.Document))
				require.Equal(t, `{"b":2}`, string(c.Document), "documents are stored compacted")
				require.Equal(t, t0, c.CreatedAt)
				require.Equal(t, t0.Add(time.Minute), c.UpdatedAt)
			}},
		{name: "configuration unknown namespace", typ: CmdPutConfiguration,
			payload: func(*fx) any {
				return PutConfiguration{ID: "c9", NamespaceID: "nsX", Name: "x", Document: json.RawMessage(`{}`)}
			}, wantErr: ErrNotFound},
		{name: "configuration moves namespace", typ: CmdPutConfiguration,
			payload: func(*fx) any {
				return PutConfiguration{ID: "c1", NamespaceID: "ns2", Name: "x", Document: json.RawMessage(`{}`)}
			}, wantErr: ErrConflict},
		{name: "configuration name taken", typ: CmdPutConfiguration,
			payload: func(*fx) any {
				return PutConfiguration{ID: "c9", NamespaceID: "ns1", Name: "cfg", Document: json.RawMessage(`{}`)}
			}, wantErr: ErrConflict},
		{name: "configuration null document", typ: CmdPutConfiguration,
			payload: func(*fx) any {
				return PutConfiguration{ID: "c9", NamespaceID: "ns1", Name: "n", Document: json.RawMessage(`null`)}
			}, wantErr: ErrInvalid},
		// Agents.
		{name: "agent default mode embedded", typ: CmdCreateAgent,
			payload: func(*fx) any {
				return CreateAgent{ID: "a2", NamespaceID: "ns2", Name: "bot", ConfigurationID: "c2", Plugins: []string{"p"}}
			},
			check: func(t *testing.T, f *fx, res any) {
				a, ok := f.m.Agent("a2")
				require.True(t, ok)
				require.Equal(t, ModeEmbedded, a.ExecutionMode)
				require.Equal(t, res, a)
				require.Len(t, f.m.Agents(""), 2)
				require.Len(t, f.m.Agents("ns2"), 1)
			}},
		{name: "agent name taken in namespace", typ: CmdCreateAgent,
			payload: func(*fx) any { return CreateAgent{ID: "a2", NamespaceID: "ns1", Name: "bot", ConfigurationID: "c1"} }, wantErr: ErrConflict},
		{name: "agent configuration of other namespace", typ: CmdCreateAgent,
			payload: func(*fx) any { return CreateAgent{ID: "a2", NamespaceID: "ns1", Name: "x", ConfigurationID: "c2"} }, wantErr: ErrNotFound},
		{name: "agent bad mode", typ: CmdCreateAgent,
			payload: func(*fx) any {
				return CreateAgent{ID: "a2", NamespaceID: "ns1", Name: "x", ConfigurationID: "c1", ExecutionMode: "remote"}
			}, wantErr: ErrInvalid},
		{name: "update agent omitting mode preserves it", typ: CmdUpdateAgent,
			setup: func(f *fx) {
				f.must(CmdUpdateAgent, UpdateAgent{AgentID: "a1", ExecutionMode: strp(ModeDedicated)})
			},
			payload: func(*fx) any { return UpdateAgent{AgentID: "a1", ComputeID: strp("k8s")} },
			check: func(t *testing.T, f *fx, res any) {
				a := res.(Agent)
				require.Equal(t, ModeDedicated, a.ExecutionMode)
				require.Equal(t, "k8s", a.ComputeID)
			}},
		{name: "update agent bad mode", typ: CmdUpdateAgent,
			payload: func(*fx) any { return UpdateAgent{AgentID: "a1", ExecutionMode: strp("x")} }, wantErr: ErrInvalid},
		{name: "update deleting agent", typ: CmdUpdateAgent,
			setup:   func(f *fx) { f.must(CmdRequestDelete, RequestDelete{AgentID: "a1", WorkID: "d1"}) },
			payload: func(*fx) any { return UpdateAgent{AgentID: "a1", ComputeID: strp("k8s")} }, wantErr: ErrConflict},
		// Admission.
		{name: "admit", typ: CmdAdmitRevision, setup: func(f *fx) { f.admit("r0", "w0") },
			payload: func(*fx) any { return AdmitRevision{Revision: rev("r1", "a1", 1), WorkID: "w1"} },
			check: func(t *testing.T, f *fx, res any) {
				r := res.(Admitted).Revision
				require.Equal(t, "w1", res.(Admitted).WorkID)
				require.EqualValues(t, 2, r.Number)
				require.Equal(t, RevisionPending, r.Status)
				w, ok := f.m.Work("w1")
				require.True(t, ok)
				require.Equal(t, Work{ID: "w1", Kind: WorkActivate, NamespaceID: "ns1", AgentID: "a1", RevisionID: "r1",
					State: WorkQueued, Phase: PhaseQueued, MaxAttempts: DefaultMaxAttempts, AvailableAt: t0, Actor: "alice",
					CreatedAt: t0, UpdatedAt: t0}, w)
				au := lifecycle(f.m.Audit(0, 0))
				require.Len(t, au, 2)
				require.Equal(t, AuditDeploy, au[1].Action)
				require.Equal(t, "r1", au[1].RevisionID)
				require.Equal(t, `Agent::"one/bot"`, au[1].Resource)
				require.Equal(t, OutcomeSuccess, au[1].Outcome)
				// Admitting a newer revision leaves the older work alone.
				w0, _ := f.m.Work("w0")
				require.Equal(t, WorkQueued, w0.State)
				revs := f.m.Revisions("a1")
				require.Equal(t, []string{"r0", "r1"}, []string{revs[0].ID, revs[1].ID})
			}},
		{name: "admit stale configuration generation", typ: CmdAdmitRevision,
			setup: func(f *fx) {
				f.must(CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg", Document: json.RawMessage(`{}`)})
			},
			payload: func(*fx) any { return AdmitRevision{Revision: rev("r1", "a1", 1), WorkID: "w1"} }, wantErr: ErrConflict},
		{name: "admit after mode change", typ: CmdAdmitRevision,
			setup:   func(f *fx) { f.must(CmdUpdateAgent, UpdateAgent{AgentID: "a1", ExecutionMode: strp(ModeDedicated)}) },
			payload: func(*fx) any { return AdmitRevision{Revision: rev("r1", "a1", 1), WorkID: "w1"} }, wantErr: ErrConflict},
		{name: "admit for deleting agent", typ: CmdAdmitRevision,
			setup:   func(f *fx) { f.must(CmdRequestDelete, RequestDelete{AgentID: "a1", WorkID: "d1"}) },
			payload: func(*fx) any { return AdmitRevision{Revision: rev("r1", "a1", 1), WorkID: "w1"} }, wantErr: ErrConflict},
		{name: "admit duplicate revision", typ: CmdAdmitRevision, setup: func(f *fx) { f.admit("r1", "w0") },
			payload: func(*fx) any { return AdmitRevision{Revision: rev("r1", "a1", 1), WorkID: "w1"} }, wantErr: ErrConflict},
		{name: "admit unknown agent", typ: CmdAdmitRevision,
			payload: func(*fx) any { return AdmitRevision{Revision: rev("r1", "zz", 1), WorkID: "w1"} }, wantErr: ErrNotFound},
		{name: "admit bad harness", typ: CmdAdmitRevision,
			payload: func(*fx) any {
				r := rev("r1", "a1", 1)
				r.Harness.ID = "claude"
				return AdmitRevision{Revision: r, WorkID: "w1"}
			}, wantErr: ErrInvalid},
		// Stop and delete requests.
		{name: "request stop", typ: CmdRequestStop, setup: func(f *fx) { f.activated() },
			payload: func(*fx) any { return RequestStop{AgentID: "a1", WorkID: "s1"} },
			check: func(t *testing.T, f *fx, res any) {
				w := res.(Work)
				require.Equal(t, WorkStop, w.Kind)
				require.Equal(t, "r1", w.RevisionID)
			}},
		{name: "request delete twice", typ: CmdRequestDelete,
			setup:   func(f *fx) { f.must(CmdRequestDelete, RequestDelete{AgentID: "a1", WorkID: "d1"}) },
			payload: func(*fx) any { return RequestDelete{AgentID: "a1", WorkID: "d2"} }, wantErr: ErrConflict},
		// Claims.
		{name: "claim", typ: CmdClaimWork, setup: func(f *fx) { f.admit("r1", "w1") },
			payload: func(f *fx) any { return ClaimWork{WorkID: "w1", Owner: "o", LeaseExpiry: f.now.Add(5 * time.Second)} },
			check: func(t *testing.T, f *fx, res any) {
				cr := res.(*ClaimResult)
				require.Equal(t, 1, cr.Work.Attempts)
				require.Equal(t, WorkClaimed, cr.Work.State)
				require.Equal(t, "r1", cr.Revision.ID)
			}},
		{name: "claim not yet available", typ: CmdClaimWork,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				f.claim("w1", "o")
				f.must(CmdRequeueWork, RequeueWork{ClaimRef: ref("w1", "o"), AvailableAt: f.now.Add(time.Minute), Code: "X"})
			},
			payload: func(f *fx) any { return ClaimWork{WorkID: "w1", Owner: "o", LeaseExpiry: f.now.Add(5 * time.Second)} }, wantErr: ErrNotClaimable},
		{name: "claim while agent busy", typ: CmdClaimWork,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				f.admit("r2", "w2")
				f.claim("w1", "o")
			},
			payload: func(f *fx) any { return ClaimWork{WorkID: "w2", Owner: "o", LeaseExpiry: f.now.Add(5 * time.Second)} }, wantErr: ErrNotClaimable},
		{name: "reclaim expired claim", typ: CmdClaimWork,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				f.claim("w1", "o")
				f.now = f.now.Add(6 * time.Second)
			},
			payload: func(f *fx) any { return ClaimWork{WorkID: "w1", Owner: "p", LeaseExpiry: f.now.Add(5 * time.Second)} },
			check: func(t *testing.T, f *fx, res any) {
				w := res.(*ClaimResult).Work
				require.Equal(t, "p", w.Owner)
				require.Equal(t, 2, w.Attempts)
				require.Equal(t, CodeLeaseExpired, w.LastCode)
			}},
		{name: "claim live claim", typ: CmdClaimWork, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(f *fx) any { return ClaimWork{WorkID: "w1", Owner: "p", LeaseExpiry: f.now.Add(5 * time.Second)} }, wantErr: ErrNotClaimable},
		{name: "claim out of attempts", typ: CmdClaimWork,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				for range 3 {
					f.claim("w1", "o")
					f.must(CmdRequeueWork, RequeueWork{ClaimRef: ref("w1", "o"), AvailableAt: f.now, Code: "X"})
				}
			},
			payload: func(f *fx) any { return ClaimWork{WorkID: "w1", Owner: "o", LeaseExpiry: f.now.Add(5 * time.Second)} }, wantErr: ErrNotClaimable},
		{name: "claim with past lease", typ: CmdClaimWork, setup: func(f *fx) { f.admit("r1", "w1") },
			payload: func(f *fx) any { return ClaimWork{WorkID: "w1", Owner: "o", LeaseExpiry: f.now} }, wantErr: ErrInvalid},
		{name: "renew", typ: CmdRenewClaim, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(f *fx) any { return RenewClaim{ClaimRef: ref("w1", "o"), LeaseExpiry: f.now.Add(time.Hour)} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, t0.Add(time.Hour), res.(Work).LeaseExpiry)
			}},
		{name: "renew other owner", typ: CmdRenewClaim, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(f *fx) any { return RenewClaim{ClaimRef: ref("w1", "p"), LeaseExpiry: f.now.Add(time.Hour)} }, wantErr: ErrClaimLost},
		{name: "phase after lease expiry", typ: CmdSetWorkPhase,
			setup:   func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o"); f.now = f.now.Add(5*time.Second + 1) },
			payload: func(*fx) any { return SetWorkPhase{ClaimRef: ref("w1", "o"), Phase: PhasePreparing} }, wantErr: ErrClaimLost},
		{name: "phase at lease expiry still live", typ: CmdSetWorkPhase,
			setup:   func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o"); f.now = f.now.Add(5 * time.Second) },
			payload: func(*fx) any { return SetWorkPhase{ClaimRef: ref("w1", "o"), Phase: PhasePreparing} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, PhasePreparing, res.(Work).Phase)
			}},
		{name: "phase records the activation's start once", typ: CmdSetWorkPhase,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				f.claim("w1", "o")
				f.must(CmdSetWorkPhase, SetWorkPhase{ClaimRef: ref("w1", "o"), Phase: PhaseQueued})
				_, queued := f.m.WorkStarted("w1")
				require.False(f.t, queued, "the queued phase is no start")
				f.must(CmdSetWorkPhase, SetWorkPhase{ClaimRef: ref("w1", "o"), Phase: PhaseStopping})
				f.now = f.now.Add(time.Second)
			},
			payload: func(*fx) any { return SetWorkPhase{ClaimRef: ref("w1", "o"), Phase: PhasePreparing} },
			check: func(t *testing.T, f *fx, res any) {
				at, ok := f.m.WorkStarted("w1")
				require.True(t, ok)
				require.Equal(t, t0, at, "the first phase past queued is the start")
				f.must(CmdFailWork, FailWork{ClaimRef: ref("w1", "o"), Code: "X"})
				_, ok = f.m.WorkStarted("w1")
				require.False(t, ok, "kept only while the work is open")
			}},
		{name: "phase unknown", typ: CmdSetWorkPhase, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(*fx) any { return SetWorkPhase{ClaimRef: ref("w1", "o"), Phase: "dancing"} }, wantErr: ErrInvalid},
		{name: "phase of unclaimed work", typ: CmdSetWorkPhase, setup: func(f *fx) { f.admit("r1", "w1") },
			payload: func(*fx) any { return SetWorkPhase{ClaimRef: ref("w1", "o"), Phase: PhasePreparing} }, wantErr: ErrClaimLost},
		{name: "requeue deferred gives the attempt back", typ: CmdRequeueWork,
			setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(f *fx) any {
				return RequeueWork{ClaimRef: ref("w1", "o"), AvailableAt: f.now.Add(time.Second), Code: "ACTIVATION_PENDING", Defer: true}
			},
			check: func(t *testing.T, f *fx, res any) {
				w := res.(Work)
				require.Equal(t, 0, w.Attempts)
				require.Equal(t, WorkQueued, w.State)
				require.Empty(t, w.Owner)
				require.Equal(t, "ACTIVATION_PENDING", w.LastCode)
			}},
		{name: "requeue without code", typ: CmdRequeueWork, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(f *fx) any { return RequeueWork{ClaimRef: ref("w1", "o")} }, wantErr: ErrInvalid},
		{name: "fail", typ: CmdFailWork, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(*fx) any {
				return FailWork{ClaimRef: ref("w1", "o"), Code: "RUNTIME_LOGIN_FAILED", Detail: "LOGIN_FAILED"}
			},
			check: func(t *testing.T, f *fx, res any) {
				r, _ := f.m.Revision("r1")
				require.Equal(t, RevisionFailed, r.Status)
				require.Equal(t, "RUNTIME_LOGIN_FAILED", r.FailureCode)
				au := lifecycle(f.m.Audit(0, 0))
				require.Len(t, au, 2)
				require.Equal(t, AuditFail, au[1].Action)
				require.Equal(t, OutcomeFailure, au[1].Outcome)
			}},
		{name: "expire exhausted", typ: CmdExpireWork,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				for range 3 {
					f.claim("w1", "o")
					f.now = f.now.Add(6 * time.Second)
				}
			},
			payload: func(*fx) any { return ExpireWork{WorkID: "w1"} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, CodeMaxAttemptsExhausted, res.(Work).LastCode)
				r, _ := f.m.Revision("r1")
				require.Equal(t, RevisionFailed, r.Status)
			}},
		{name: "expire with attempts left", typ: CmdExpireWork, setup: func(f *fx) { f.admit("r1", "w1") },
			payload: func(*fx) any { return ExpireWork{WorkID: "w1"} }, wantErr: ErrNotClaimable},
		{name: "supersede without newer revision", typ: CmdSupersedeWork, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(*fx) any { return SupersedeWork{ClaimRef: ref("w1", "o")} }, wantErr: ErrConflict},
		{name: "supersede", typ: CmdSupersedeWork,
			setup:   func(f *fx) { f.admit("r1", "w1"); f.admit("r2", "w2"); f.claim("w1", "o") },
			payload: func(*fx) any { return SupersedeWork{ClaimRef: ref("w1", "o")} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, WorkSuperseded, res.(Work).State)
				r, _ := f.m.Revision("r1")
				require.Equal(t, RevisionSuperseded, r.Status)
			}},
		// Predecessor stops.
		{name: "record predecessor", typ: CmdRecordPredecessor,
			setup: func(f *fx) { f.admit("r1", "w1"); f.admit("r2", "w2"); f.claim("w2", "o") },
			payload: func(f *fx) any {
				return RecordPredecessorStop{ClaimRef: ref("w2", "o"), RevisionID: "r1", NextCheckAt: f.now.Add(5 * time.Second)}
			},
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, []PredecessorStop{{AgentID: "a1", RevisionID: "r1", StoppedAt: t0, NextCheckAt: t0.Add(5 * time.Second)}},
					f.m.PredecessorStops("a1"))
			}},
		{name: "record self as predecessor", typ: CmdRecordPredecessor,
			setup:   func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(*fx) any { return RecordPredecessorStop{ClaimRef: ref("w1", "o"), RevisionID: "r1"} }, wantErr: ErrInvalid},
		{name: "drop predecessor", typ: CmdDropPredecessor,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				f.admit("r2", "w2")
				f.admit("r3", "w3")
				f.claim("w3", "o")
				f.must(CmdRecordPredecessor, RecordPredecessorStop{ClaimRef: ref("w3", "o"), RevisionID: "r1"})
				f.must(CmdRecordPredecessor, RecordPredecessorStop{ClaimRef: ref("w3", "o"), RevisionID: "r2"})
			},
			payload: func(*fx) any { return DropPredecessorStop{ClaimRef: ref("w3", "o"), RevisionIDs: []string{"r1"}} },
			check: func(t *testing.T, f *fx, res any) {
				st := f.m.PredecessorStops("a1")
				require.Len(t, st, 1)
				require.Equal(t, "r2", st[0].RevisionID)
			}},
		// Activation.
		{name: "activate CAS", typ: CmdActivateRevision, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(*fx) any { return ActivateRevision{ClaimRef: ref("w1", "o")} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, "r1", res.(Agent).ActiveRevisionID)
				r, _ := f.m.Revision("r1")
				require.Equal(t, RevisionActive, r.Status)
			}},
		{name: "activate CAS mismatch", typ: CmdActivateRevision, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(*fx) any { return ActivateRevision{ClaimRef: ref("w1", "o"), Expected: "r0"} }, wantErr: ErrActiveRevisionChanged},
		{name: "complete activation once", typ: CmdCompleteActivation,
			setup: func(f *fx) {
				f.activated()
				f.admit("r2", "w2")
				f.claim("w2", "o")
				f.must(CmdRecordPredecessor, RecordPredecessorStop{ClaimRef: ref("w2", "o"), RevisionID: "r1"})
				f.must(CmdActivateRevision, ActivateRevision{ClaimRef: ref("w2", "o"), Expected: "r1"})
			},
			payload: func(*fx) any { return CompleteActivation{ClaimRef: ref("w2", "o"), Retired: []string{"r1"}} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, WorkCompleted, res.(Work).State)
				r1, _ := f.m.Revision("r1")
				require.Equal(t, RevisionRetired, r1.Status)
				require.Empty(t, f.m.PredecessorStops("a1"))
				_, err := f.apply(CmdCompleteActivation, CompleteActivation{ClaimRef: ref("w2", "o")})
				require.ErrorIs(t, err, ErrClaimLost)
				var acts []string
				for _, a := range f.m.Audit(0, 0) {
					if a.Action == AuditActivate {
						acts = append(acts, a.RevisionID)
					}
				}
				require.Equal(t, []string{"r1", "r2"}, acts)
			}},
		{name: "complete activation before CAS", typ: CmdCompleteActivation, setup: func(f *fx) { f.admit("r1", "w1"); f.claim("w1", "o") },
			payload: func(*fx) any { return CompleteActivation{ClaimRef: ref("w1", "o")} }, wantErr: ErrActiveRevisionChanged},
		{name: "complete activation retiring itself", typ: CmdCompleteActivation,
			setup: func(f *fx) {
				f.admit("r1", "w1")
				f.claim("w1", "o")
				f.must(CmdActivateRevision, ActivateRevision{ClaimRef: ref("w1", "o")})
			},
			payload: func(*fx) any { return CompleteActivation{ClaimRef: ref("w1", "o"), Retired: []string{"r1"}} }, wantErr: ErrInvalid},
		{name: "set revision status", typ: CmdSetRevisionStatus,
			setup: func(f *fx) {
				f.activated()
				f.must(CmdRequestStop, RequestStop{AgentID: "a1", WorkID: "s1"})
				f.claim("s1", "o")
			},
			payload: func(*fx) any {
				return SetRevisionStatus{ClaimRef: ref("s1", "o"), RevisionID: "r1", Status: RevisionActive}
			}, wantErr: ErrInvalid},
		{name: "complete stop", typ: CmdCompleteStop,
			setup: func(f *fx) {
				f.activated()
				f.must(CmdRequestStop, RequestStop{AgentID: "a1", WorkID: "s1"})
				f.claim("s1", "o")
			},
			payload: func(*fx) any { return CompleteStop{ClaimRef: ref("s1", "o"), Expected: "r1"} },
			check: func(t *testing.T, f *fx, res any) {
				a, _ := f.m.Agent("a1")
				require.Empty(t, a.ActiveRevisionID)
				r, _ := f.m.Revision("r1")
				require.Equal(t, RevisionStopped, r.Status)
				au := f.m.Audit(0, 0)
				require.Equal(t, AuditStop, au[len(au)-1].Action)
			}},
		{name: "complete stop wrong expected", typ: CmdCompleteStop,
			setup: func(f *fx) {
				f.activated()
				f.must(CmdRequestStop, RequestStop{AgentID: "a1", WorkID: "s1"})
				f.claim("s1", "o")
			},
			payload: func(*fx) any { return CompleteStop{ClaimRef: ref("s1", "o"), Expected: ""} }, wantErr: ErrActiveRevisionChanged},
		{name: "complete deletion keeps audit", typ: CmdCompleteDeletion,
			setup: func(f *fx) {
				f.activated()
				f.must(CmdRequestDelete, RequestDelete{AgentID: "a1", WorkID: "d1"})
				f.claim("d1", "o")
			},
			payload: func(*fx) any { return CompleteDeletion{ClaimRef: ref("d1", "o")} },
			check: func(t *testing.T, f *fx, res any) {
				_, ok := f.m.Agent("a1")
				require.False(t, ok)
				require.Empty(t, f.m.Revisions("a1"))
				require.Empty(t, f.m.WorkItems(WorkFilter{AgentID: "a1"}))
				au := lifecycle(f.m.Audit(0, 0))
				require.Equal(t, []string{AuditDeploy, AuditActivate, AuditDeleteRequest, AuditDelete},
					[]string{au[0].Action, au[1].Action, au[2].Action, au[3].Action})
			}},
		{name: "complete deletion with stop work", typ: CmdCompleteDeletion,
			setup: func(f *fx) {
				f.activated()
				f.must(CmdRequestStop, RequestStop{AgentID: "a1", WorkID: "s1"})
				f.claim("s1", "o")
			},
			payload: func(*fx) any { return CompleteDeletion{ClaimRef: ref("s1", "o")} }, wantErr: ErrInvalid},
		{name: "installation", typ: CmdSetInstallation,
			payload: func(*fx) any { return SetInstallation{Installation: Installation{SandboxDriver: "gvisor"}} },
			check: func(t *testing.T, f *fx, res any) {
				require.Equal(t, "gvisor", f.m.Installation().SandboxDriver)
			}},
		{name: "unknown command", typ: rawName("Explode"), payload: func(*fx) any { return struct{}{} }, wantErr: ErrInvalid},
		{name: "unknown payload field", typ: CmdCreateNamespace,
			payload: func(*fx) any { return map[string]string{"id": "x", "name": "y", "color": "z"} }, wantErr: ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFx(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := f.m.Digest()
			applied := f.m.Applied()
			res, err := f.apply(tc.typ, tc.payload(f))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, res)
				require.Equal(t, before, f.m.Digest(), "a rejected command changes nothing")
				require.Equal(t, applied, f.m.Applied())
				return
			}
			require.NoError(t, err)
			require.NotEqual(t, before, f.m.Digest())
			if tc.check != nil {
				tc.check(t, f, res)
			}
		})
	}
}

func TestClaimLostForEveryClaimRefCommand(t *testing.T) {
	payloads := map[Named]func(r ClaimRef) any{
		CmdRenewClaim:         func(r ClaimRef) any { return RenewClaim{ClaimRef: r, LeaseExpiry: t0.Add(time.Hour)} },
		CmdSetWorkPhase:       func(r ClaimRef) any { return SetWorkPhase{ClaimRef: r, Phase: PhaseReady} },
		CmdRequeueWork:        func(r ClaimRef) any { return RequeueWork{ClaimRef: r, Code: "X"} },
		CmdFailWork:           func(r ClaimRef) any { return FailWork{ClaimRef: r, Code: "X"} },
		CmdSupersedeWork:      func(r ClaimRef) any { return SupersedeWork{ClaimRef: r} },
		CmdRecordPredecessor:  func(r ClaimRef) any { return RecordPredecessorStop{ClaimRef: r, RevisionID: "r1"} },
		CmdDropPredecessor:    func(r ClaimRef) any { return DropPredecessorStop{ClaimRef: r} },
		CmdActivateRevision:   func(r ClaimRef) any { return ActivateRevision{ClaimRef: r} },
		CmdCompleteActivation: func(r ClaimRef) any { return CompleteActivation{ClaimRef: r} },
		CmdSetRevisionStatus:  func(r ClaimRef) any { return SetRevisionStatus{ClaimRef: r, RevisionID: "r1", Status: RevisionStopped} },
		CmdCompleteStop:       func(r ClaimRef) any { return CompleteStop{ClaimRef: r} },
		CmdCompleteDeletion:   func(r ClaimRef) any { return CompleteDeletion{ClaimRef: r} },
	}
	situations := map[string]func(f *fx) ClaimRef{
		"other owner": func(f *fx) ClaimRef { f.claim("w2", "o"); return ref("w2", "p") },
		"not claimed": func(f *fx) ClaimRef { return ref("w2", "o") },
		"expired":     func(f *fx) ClaimRef { f.claim("w2", "o"); f.now = f.now.Add(time.Minute); return ref("w2", "o") },
		"gone":        func(f *fx) ClaimRef { return ref("nope", "o") },
		"reclaimed": func(f *fx) ClaimRef {
			f.claim("w2", "o")
			f.now = f.now.Add(time.Minute)
			f.claim("w2", "p")
			return ref("w2", "o")
		},
	}
	for typ, mk := range payloads {
		for sit, setup := range situations {
			t.Run(fmt.Sprintf("%s/%s", typ, sit), func(t *testing.T) {
				f := newFx(t)
				f.admit("r1", "w1")
				f.admit("r2", "w2")
				r := setup(f)
				before := f.m.Digest()
				_, err := f.apply(typ, mk(r))
				require.ErrorIs(t, err, ErrClaimLost)
				require.Equal(t, before, f.m.Digest())
			})
		}
	}
}

func TestPredecessorStopsBounded(t *testing.T) {
	f := newFx(t)
	n := MaxPredecessorStops + 2
	for i := range n {
		f.admit(fmt.Sprintf("r%05d", i), fmt.Sprintf("w%05d", i))
	}
	last := fmt.Sprintf("w%05d", n-1)
	f.claim(last, "o")
	for i := range n - 1 {
		f.must(CmdRecordPredecessor, RecordPredecessorStop{ClaimRef: ref(last, "o"), RevisionID: fmt.Sprintf("r%05d", i)})
	}
	st := f.m.PredecessorStops("a1")
	require.Len(t, st, MaxPredecessorStops)
	require.Equal(t, "r00001", st[0].RevisionID, "the oldest record is evicted")
	require.Equal(t, fmt.Sprintf("r%05d", n-2), st[len(st)-1].RevisionID)
}

func TestApplyBytesStrict(t *testing.T) {
	m := NewMachine()
	for name, entry := range map[string]string{
		"unknown envelope field": `{"type":"CreateNamespace","time":"2026-11-29T09:00:00Z","payload":{"id":"a","name":"b"},"x":1}`,
		"unknown payload field":  `{"type":"CreateNamespace","time":"2026-11-29T09:00:00Z","payload":{"id":"a","name":"b","x":1}}`,
		"trailing data":          `{"type":"CreateNamespace","time":"2026-11-29T09:00:00Z","payload":{"id":"a","name":"b"}} {}`,
		"no time":                `{"type":"CreateNamespace","payload":{"id":"a","name":"b"}}`,
		"no payload":             `{"type":"CreateNamespace","time":"2026-11-29T09:00:00Z"}`,
		"wrong payload type":     `{"type":"CreateNamespace","time":"2026-11-29T09:00:00Z","payload":[1]}`,
		"not json":               `create namespace`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := m.ApplyBytes([]byte(entry))
			require.ErrorIs(t, err, ErrInvalid)
			require.Empty(t, m.Namespaces())
		})
	}
	_, err := m.ApplyBytes([]byte(`{"type":"CreateNamespace","time":"2026-11-29T10:00:00+01:00","payload":{"id":"a","name":"b"}}`))
	require.NoError(t, err)
	ns, _ := m.Namespace("a")
	require.Equal(t, t0, ns.CreatedAt, "entry time is normalized to UTC")
}

func TestReadsAreCopies(t *testing.T) {
	f := newFx(t)
	f.must(CmdUpdateAgent, UpdateAgent{AgentID: "a1", Plugins: &[]string{"p"}, HarnessAuth: &HarnessAuth{Method: "api_key"}})
	a, _ := f.m.Agent("a1")
	a.Plugins[0] = "evil"
	a.HarnessAuth.Method = "evil"
	b, _ := f.m.Agent("a1")
	require.Equal(t, []string{"p"}, b.Plugins)
	require.Equal(t, "api_key", b.HarnessAuth.Method)
}

func TestChangedSignalsApply(t *testing.T) {
	f := newFx(t)
	ch := f.m.Changed()
	select {
	case <-ch:
		t.Fatal("closed before an apply")
	default:
	}
	f.admit("r1", "w1")
	select {
	case <-ch:
	default:
		t.Fatal("not closed after an apply")
	}
}

func TestClaimableOrderAndWakeup(t *testing.T) {
	f := newFx(t)
	f.must(CmdCreateAgent, CreateAgent{ID: "a2", NamespaceID: "ns2", Name: "b2", ConfigurationID: "c2"})
	f.admit("r1", "w1")
	f.now = f.now.Add(time.Second)
	f.admit("r2", "w2")
	r := rev("r3", "a2", 1)
	r.NamespaceID, r.ConfigurationID = "ns2", "c2"
	f.must(CmdAdmitRevision, AdmitRevision{Revision: r, WorkID: "w3"})
	got := f.m.Claimable(f.now)
	require.Equal(t, []string{"w1", "w3"}, []string{got[0].ID, got[1].ID}, "one per agent, oldest first")
	f.claim("w1", "o")
	got = f.m.Claimable(f.now)
	require.Len(t, got, 1)
	require.Equal(t, "w3", got[0].ID)
	at, ok := f.m.NextWakeup(f.now)
	require.True(t, ok)
	require.Equal(t, f.now.Add(5*time.Second+time.Nanosecond), at)
}

// lifecycle keeps the openclaw.agents.lifecycle records of an audit log.
func lifecycle(au []AuditRecord) []AuditRecord {
	var out []AuditRecord
	for _, a := range au {
		if strings.HasPrefix(a.Action, "openclaw.agents.lifecycle.") {
			out = append(out, a)
		}
	}
	return out
}

func TestDeleteNamespaceAndConfigurationWhileReferenced(t *testing.T) {
	m, apply := teamMachine(t)
	var err error
	_, err = apply(CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "n1", Name: "cfg", Document: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = apply(CmdCreateAgent, CreateAgent{ID: "a1", NamespaceID: "n1", Name: "bot", ConfigurationID: "c1"})
	require.NoError(t, err)

	before := m.Digest()
	_, err = apply(CmdDeleteConfiguration, DeleteConfiguration{ID: "c1"})
	require.ErrorIs(t, err, ErrConflict, "an Agent references it")
	_, err = apply(CmdDeleteNamespace, DeleteNamespace{ID: "n1"})
	require.ErrorIs(t, err, ErrConflict, "it holds an Agent")
	require.Equal(t, before, m.Digest(), "a refused delete changes nothing")

	_, err = apply(CmdRequestDelete, RequestDelete{AgentID: "a1", WorkID: "w1"})
	require.NoError(t, err)
	_, err = apply(CmdClaimWork, ClaimWork{WorkID: "w1", Owner: "e", LeaseExpiry: teamMachineTime.Add(time.Hour)})
	require.NoError(t, err)
	_, err = apply(CmdCompleteDeletion, CompleteDeletion{ClaimRef: ClaimRef{WorkID: "w1", Owner: "e"}})
	require.NoError(t, err)

	_, err = apply(CmdDeleteNamespace, DeleteNamespace{ID: "n1"})
	require.ErrorIs(t, err, ErrConflict, "it still holds a Configuration")
	_, err = apply(CmdDeleteConfiguration, DeleteConfiguration{ID: "c1"})
	require.NoError(t, err)
	_, ok := m.ConfigurationByName("n1", "cfg")
	require.False(t, ok, "the name index forgets it")
	_, err = apply(CmdDeleteNamespace, DeleteNamespace{ID: "n1"})
	require.NoError(t, err)
	_, ok = m.NamespaceByName("team")
	require.False(t, ok)
	_, err = apply(CmdCreateNamespace, CreateNamespace{ID: "n2", Name: "team"})
	require.NoError(t, err, "the name is free again")
	_, err = apply(CmdDeleteNamespace, DeleteNamespace{ID: "n1"})
	require.ErrorIs(t, err, ErrNotFound)
}

// TestRevisionWorkIndex: a revision's latest work and the open work are
// read from indexes that agree with a scan of the whole history, after
// applies and after a snapshot restore.
func TestRevisionWorkIndex(t *testing.T) {
	f := newFx(t)
	f.activated()
	f.now = f.now.Add(time.Second)
	f.admit("r2", "w2")
	check := func(m *Machine) {
		t.Helper()
		w, ok := m.LatestRevisionWork("r1", WorkActivate)
		require.True(t, ok)
		require.Equal(t, "w1", w.ID)
		require.Equal(t, WorkCompleted, w.State)
		w, ok = m.LatestRevisionWork("r2", WorkActivate)
		require.True(t, ok)
		require.Equal(t, "w2", w.ID)
		_, ok = m.LatestRevisionWork("r2", WorkDelete)
		require.False(t, ok, "no work of that kind")
		_, ok = m.LatestRevisionWork("nope", WorkActivate)
		require.False(t, ok)
		var open []Work
		for _, w := range m.WorkItems(WorkFilter{AgentID: "a1", Kind: WorkActivate}) {
			if w.State == WorkQueued || w.State == WorkClaimed {
				open = append(open, w)
			}
		}
		require.Equal(t, open, m.OpenWorkItems(WorkFilter{AgentID: "a1", Kind: WorkActivate}))
		require.Len(t, open, 1)
	}
	check(f.m)
	b, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	restored := NewMachine()
	require.NoError(t, restored.RestoreSnapshot(b))
	check(restored)
}

// teamMachineTime is when teamMachine's commands are applied.
var teamMachineTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// teamMachine is a machine holding the Namespace n1 ("team"), and apply,
// which encodes a command at one fixed time by "admin" and applies it.
func teamMachine(t *testing.T) (*Machine, func(Named, any) (any, error)) {
	t.Helper()
	m := NewMachine()
	apply := func(typ Named, p any) (any, error) {
		b, err := Encode(typ.Name(), teamMachineTime, "admin", p)
		require.NoError(t, err)
		return m.ApplyBytes(b)
	}
	_, err := apply(CmdCreateNamespace, CreateNamespace{ID: "n1", Name: "team"})
	require.NoError(t, err)
	return m, apply
}

// TestActiveRevisionsFollowEveryChange: the shared list of active
// revisions is rebuilt after every change that can alter it — an
// activation, a delete request, a restore — and is the same map while
// nothing changes.
func TestActiveRevisionsFollowEveryChange(t *testing.T) {
	f := newFx(t)
	require.Empty(t, f.m.ActiveRevisions())
	f.activated()
	first := f.m.ActiveRevisions()
	require.Equal(t, map[string]string{"a1": "r1"}, first)
	again := f.m.ActiveRevisions()
	require.True(t, reflect.ValueOf(first).UnsafePointer() == reflect.ValueOf(again).UnsafePointer(),
		"unchanged state: the same map, not another")

	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	_, err = f.apply(CmdActivateRevision, ActivateRevision{ClaimRef: ref("nope", "o")}) // refused
	require.Error(t, err)
	require.Equal(t, map[string]string{"a1": "r1"}, f.m.ActiveRevisions())
	f.must(CmdRequestDelete, RequestDelete{AgentID: "a1", WorkID: "d1"})
	require.Empty(t, f.m.ActiveRevisions(), "an Agent being deleted is not listed")
	require.NoError(t, f.m.RestoreSnapshot(snap))
	require.Equal(t, map[string]string{"a1": "r1"}, f.m.ActiveRevisions(), "a restore lists the restored state")
}
