package kubernetes

import (
	"context"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/credcheck"
	"oce.dev/oce/coordinator/state"
)

var _ compute.CredentialChecker = (*Driver)(nil)

// CheckCredential implements compute.CredentialChecker: the coordinator
// checks the candidate's credential before any predecessor is stopped.
func (d *Driver) CheckCredential(ctx context.Context, rev state.Revision) (compute.CredentialCheck, error) {
	return credcheck.Checker{Credentials: d.cfg.Credentials, ProviderBaseURLs: d.cfg.ProviderBaseURLs}.Check(ctx, rev)
}
