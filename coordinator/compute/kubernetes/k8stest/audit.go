package k8stest

import (
	"bufio"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
)

// The API server's own count of one client's requests (issue 27 asks for
// the coordinator's request rate "from the apiserver's own metrics"): the
// kwok cluster's kube-apiserver keeps an audit log of exactly the requests
// made as CoordinatorUser — every other client (kwok, the controllers, the
// tests' admin) is logged at level None — and CoordinatorRequests counts
// them. (Priority and fairness, whose metrics name a flow per user, is off
// in this cluster.)

// CoordinatorUser is the user CoordinatorConfig authenticates as.
const CoordinatorUser = "oce-coordinator"

// auditPolicy logs CoordinatorUser's requests once each (when the response
// completes; a watch also when it starts) and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + CoordinatorUser + `"]
- level: None
`

// auditArgs writes the audit policy under dir and returns the API server's
// flags for it.
func auditArgs(dir string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + filepath.Join(dir, "audit.log"),
		"--audit-log-format=json", "--audit-log-mode=blocking"}, nil
}

// issueCoordinator issues CoordinatorUser's client certificate (in
// system:masters, as the admin: the point is the name, not the rights).
func (e *Env) issueCoordinator(p *pki) error {
	cert, key, err := p.issue("coordinator", pkix.Name{CommonName: CoordinatorUser, Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	e.coordinator = rest.CopyConfig(e.Config)
	e.coordinator.CertFile, e.coordinator.KeyFile = cert, key
	return nil
}

// CoordinatorConfig is a copy of Config that authenticates as
// CoordinatorUser, whose requests the API server's audit log counts
// (CoordinatorRequests). Nil on the real node's cluster.
func (e *Env) CoordinatorConfig() *rest.Config {
	if e.coordinator == nil {
		return nil
	}
	return rest.CopyConfig(e.coordinator)
}

// CoordinatorRequests is the number of requests the API server received
// from CoordinatorUser in [from, to), by its audit log; watches count once,
// when they start.
func (e *Env) CoordinatorRequests(from, to time.Time) (int, error) {
	f, err := os.Open(filepath.Join(e.Dir, "audit.log"))
	if err != nil {
		return 0, fmt.Errorf("k8stest: audit log: %w", err)
	}
	defer f.Close()
	var ev struct {
		AuditID  string `json:"auditID"`
		Received string `json:"requestReceivedTimestamp"`
		User     struct {
			Username string `json:"username"`
		} `json:"user"`
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		ev.AuditID, ev.Received, ev.User.Username = "", "", ""
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return 0, fmt.Errorf("k8stest: audit log line: %w", err)
		}
		at, err := time.Parse(time.RFC3339Nano, ev.Received)
		if err != nil || ev.User.Username != CoordinatorUser || at.Before(from) || !at.Before(to) {
			continue
		}
		seen[ev.AuditID] = true
	}
	return len(seen), sc.Err()
}
