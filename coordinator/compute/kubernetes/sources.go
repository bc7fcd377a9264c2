package kubernetes

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// The credential sources of an oce Namespace (docs/credentials.md) are
// Secrets of its own data-plane namespace, exactly owned like every object
// the driver makes: Secret credential-<name>, labelled managed-by=oce,
// openclaw.dev/namespace=<id> and oce.dev/credential-source=<name>, with the
// namespace-id annotation and the source's version. A revision's reference
// resolves only there (NamespaceSecrets), so no Agent can name a Secret of
// another Namespace, of the coordinator, or of any namespace oce does not
// manage.

// Label and annotation of a credential source's Secret.
const (
	LabelCredentialSource       = "oce.dev/credential-source"
	AnnotationCredentialVersion = "oce.dev/credential-version"
	// credentialSecretPrefix prefixes a source's name to name its Secret.
	credentialSecretPrefix = "credential-"
	// coordinatorSecretPrefix names the coordinator's own Secrets (the
	// bundle's oce-coordinator-token and -tls): in any namespace, never a
	// source.
	coordinatorSecretPrefix = "oce-coordinator"
)

// CredentialSecretName is the Secret holding credential source name.
func CredentialSecretName(name string) string { return credentialSecretPrefix + name }

// credentialSecret is the Secret of version of source name of Namespace nsID.
func credentialSecret(nsID, name string, version int64, values map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CredentialSecretName(name), Namespace: DataPlaneNamespace(nsID),
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: nsID, LabelCredentialSource: name},
			Annotations: map[string]string{AnnotationNamespaceID: nsID,
				AnnotationCredentialVersion: strconv.FormatInt(version, 10)}},
		Type: corev1.SecretTypeOpaque, Data: values,
	}
}

// credentialOwned reports whether s is exactly source name of Namespace nsID.
func credentialOwned(s *corev1.Secret, nsID, name string) bool {
	l, a := s.Labels, s.Annotations
	return l[LabelManagedBy] == ManagedBy && l[LabelNamespace] == nsID && l[LabelCredentialSource] == name &&
		l[LabelAgent] == "" && a[AnnotationNamespaceID] == nsID
}

func validSource(nsID, name string) error {
	if err := validNamespaceID(nsID); err != nil {
		return err
	}
	if !credref.ValidName(name) {
		return fmt.Errorf("%w: credential source %q", ErrInvalidTarget, name)
	}
	return nil
}

// CredentialStore implements compute.CredentialStorer.
func (d *Driver) CredentialStore() compute.CredentialStore { return sourceStore{d} }

type sourceStore struct{ d *Driver }

// PutCredential implements compute.CredentialStore: it ensures the
// Namespace's runtime namespaces, then creates or replaces the source's
// Secret (a Secret of that name with another owner is never touched).
func (s sourceStore) PutCredential(ctx context.Context, ns state.Namespace, name string, version int64, values map[string][]byte) error {
	if err := validSource(ns.ID, name); err != nil {
		return err
	}
	if err := s.d.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	want := credentialSecret(ns.ID, name, version, values)
	c := s.d.c.CoreV1().Secrets(want.Namespace)
	cur, err := c.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := c.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return transient(err) // AlreadyExists included: a retry replaces it
		}
		return nil
	case err != nil:
		return transient(err)
	case !credentialOwned(cur, ns.ID, name):
		return foreign(want.Namespace, want.Name)
	}
	want.ResourceVersion = cur.ResourceVersion
	if _, err := c.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
		return transient(err)
	}
	return nil
}

// DeleteCredential implements compute.CredentialStore: the exactly owned
// Secret goes (UID precondition); an absent one is no error.
func (s sourceStore) DeleteCredential(ctx context.Context, ns state.Namespace, name string) error {
	if err := validSource(ns.ID, name); err != nil {
		return err
	}
	dp, secret := DataPlaneNamespace(ns.ID), CredentialSecretName(name)
	c := s.d.c.CoreV1().Secrets(dp)
	cur, err := c.Get(ctx, secret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return transient(err)
	case !credentialOwned(cur, ns.ID, name):
		return foreign(dp, secret)
	}
	return deleteExact(ctx, c, secret, cur.UID, "")
}

// ReadLocation implements compute.CredentialStore: from is
// secret:[<kubernetes namespace>/]<secret>[#<key>] — without a namespace,
// the driver's LegacyCredentialNamespace (where earlier releases resolved
// secret: references); without a key, every key of the Secret. It refuses
// the coordinator's own Secrets (oce-coordinator*), service-account and
// bootstrap tokens,
// anything oce manages (runtime Secrets, other sources) and any Secret of
// a namespace oce manages for another Namespace.
func (s sourceStore) ReadLocation(ctx context.Context, ns state.Namespace, from string) (map[string][]byte, error) {
	kns, name, key, err := s.d.location(from)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(name, coordinatorSecretPrefix) {
		return nil, fmt.Errorf("%w: %s/%s is the coordinator's own", compute.ErrLocationRefused, kns, name)
	}
	if err := s.d.foreignManaged(ctx, kns, ns.ID); err != nil {
		return nil, err
	}
	sec, err := s.d.c.CoreV1().Secrets(kns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: secret %s/%s", compute.ErrLocationNotFound, kns, name)
	}
	if err != nil {
		return nil, transient(err)
	}
	if sec.Labels[LabelManagedBy] == ManagedBy || sec.Type == corev1.SecretTypeServiceAccountToken || sec.Type == corev1.SecretTypeBootstrapToken {
		return nil, fmt.Errorf("%w: %s/%s is oce's own or a cluster token", compute.ErrLocationRefused, kns, name)
	}
	if key != "" {
		v := sec.Data[key]
		if len(v) == 0 {
			return nil, fmt.Errorf("%w: secret %s/%s has no key %s", compute.ErrLocationNotFound, kns, name, key)
		}
		return map[string][]byte{key: v}, nil
	}
	out := map[string][]byte{}
	for k, v := range sec.Data {
		if len(v) > 0 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: secret %s/%s holds no value", compute.ErrLocationNotFound, kns, name)
	}
	return out, nil
}

// location parses secret:[<namespace>/]<name>[#<key>].
func (d *Driver) location(from string) (kns, name, key string, err error) {
	rest, ok := strings.CutPrefix(from, "secret:")
	bad := func() (string, string, string, error) {
		return "", "", "", fmt.Errorf("%w: the Kubernetes driver registers secret:[<namespace>/]<secret>[#<key>]", compute.ErrLocationInvalid)
	}
	if !ok {
		return bad()
	}
	rest, key, hasKey := strings.Cut(rest, "#")
	kns, name, qualified := strings.Cut(rest, "/")
	if !qualified {
		kns, name = d.cfg.LegacyCredentialNamespace, rest
	}
	if kns == "" || len(validation.IsDNS1123Label(kns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 ||
		hasKey && !credref.ValidKey(key) {
		return bad()
	}
	return kns, name, key, nil
}

// foreignManaged refuses kns when oce manages it for a Namespace other
// than nsID (a Namespace's own data-plane namespace may hold a Secret an
// operator placed there to register).
func (d *Driver) foreignManaged(ctx context.Context, kns, nsID string) error {
	cur, err := d.c.CoreV1().Namespaces().Get(ctx, kns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: namespace %s", compute.ErrLocationNotFound, kns)
	}
	if err != nil {
		return transient(err)
	}
	if cur.Labels[LabelManagedBy] == ManagedBy && !nsOwned(cur, nsID, false) {
		return fmt.Errorf("%w: %s is managed by oce for another Namespace or the Gateways", compute.ErrLocationRefused, kns)
	}
	return nil
}

// NamespaceSecrets resolves a revision's harnessAuth reference to the
// source's Secret in the revision's own data-plane namespace — nowhere else
// — and names the value as the file the revision's login needs
// (model-api-key, openai-api-key or codex-access-token; a
// chatgpt_service_account binding also takes the source's
// chatgpt-workspace-id key). The revision freezes only the reference; the
// bytes are read at delivery.
func NamespaceSecrets(client kubernetes.Interface) compute.Credentials {
	return compute.CredentialsFunc(func(ctx context.Context, rev state.Revision) (map[string][]byte, error) {
		if rev.HarnessAuth == nil || rev.HarnessAuth.SourceRef == "" {
			return nil, nil
		}
		v, all, err := compute.SourceValue(rev, func(nsID, name string) (map[string][]byte, error) {
			if err := validSource(nsID, name); err != nil {
				return nil, err
			}
			sec, err := client.CoreV1().Secrets(DataPlaneNamespace(nsID)).Get(ctx, CredentialSecretName(name), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%w: %s", compute.ErrNoSource, name)
			}
			if err != nil {
				return nil, fmt.Errorf("read credential source %s: %w", name, err)
			}
			if !credentialOwned(sec, nsID, name) {
				return nil, fmt.Errorf("%w: %s/%s", ErrForeignWorkload, sec.Namespace, sec.Name)
			}
			return sec.Data, nil
		})
		if err != nil {
			return nil, err
		}
		method := rev.HarnessAuth.Method
		file := contract.SecretModelAPIKey
		switch {
		case method == contract.LoginCodexPAT || method == contract.LoginServiceAccount:
			file = contract.SecretCodexAccessToken
		case rev.Harness.ID == state.HarnessCodex:
			file = contract.SecretOpenAIAPIKey
		}
		out := map[string][]byte{file: v}
		if method == contract.LoginServiceAccount {
			// The service account's workspace id sits beside its token.
			ws := all[contract.SecretCodexWorkspaceID]
			if len(ws) == 0 {
				return nil, fmt.Errorf("%w: the source has no key %s for %s", compute.ErrNoSource, contract.SecretCodexWorkspaceID, method)
			}
			out[contract.SecretCodexWorkspaceID] = ws
		}
		return out, nil
	})
}
