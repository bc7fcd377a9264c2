package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Credential sources of a Namespace (docs/API.md, "Credential sources";
// docs/credentials.md). A value travels from the request to the compute
// driver's store on the leader and never into the Raft log: the handler
// writes it through compute.CredentialStore first and commits the
// source's metadata second, under one lock so two writes of a source never
// interleave on this leader. A failure between the two leaves a value no
// metadata names — which no reference can reach, since a deploy needs the
// metadata — and the retried request (same Idempotency-Key, or none)
// writes it again and commits. A withdrawal deletes the value first, then
// the metadata; a DELETE of a source without metadata removes any value a
// failed create left behind and answers 404.

func (s *server) credentialRoutes(ns string) {
	const cred = "/credentials/{cred}"
	s.read("GET "+ns+"/credentials", s.listCredentials)
	s.write("POST "+ns+"/credentials", s.createCredential)
	s.read("GET "+ns+cred, s.getCredential)
	s.write("POST "+ns+cred+"/rotate", s.rotateCredential)
	s.write("DELETE "+ns+cred, s.withdrawCredential)
}

// credRes is credential source name of ns as management requests name it.
func credRes(ns state.Namespace, name string) iam.Resource {
	return iam.CredentialSourceResource(ns.Name, name, "", "")
}

func wireCredentialSource(c state.CredentialSource) wire.CredentialSource {
	refs := make([]string, 0, len(c.Keys))
	for _, k := range c.Keys {
		r := credref.Ref{Name: c.Name}
		if len(c.Keys) > 1 {
			r.Key = k
		}
		refs = append(refs, r.String())
	}
	return wire.CredentialSource{ID: c.ID, NamespaceID: c.NamespaceID, Name: c.Name, Keys: slices.Clone(c.Keys),
		Version: c.Version, References: refs, RegisteredFrom: c.RegisteredFrom, CreatedAt: c.CreatedAt,
		CreatedBy: c.CreatedBy, RotatedAt: c.RotatedAt, RotatedBy: c.RotatedBy}
}

var (
	answerCreateCredential   = answerOf(state.CmdCreateCredentialSource, pure(wireCredentialSource))
	answerRotateCredential   = answerOf(state.CmdRotateCredentialSource, pure(wireCredentialSource))
	answerWithdrawCredential = answerOf(state.CmdWithdrawCredentialSource, pure(wireCredentialSource))
)

func (s *server) listCredentials(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	var out []state.CredentialSource
	for _, c := range s.b.Machine().CredentialSources(ns.ID) {
		if s.can(r, iam.ViewCredentialSource, credRes(ns, c.Name)) {
			out = append(out, c)
		}
	}
	writeJSON(w, http.StatusOK, listOf(out, wireCredentialSource))
	return nil
}

// credentialFor is the request's source ({cred}: an id or a name) once
// the caller may act on it; a missing one answers 404 to a caller who may.
func (s *server) credentialFor(r *http.Request, act iam.Action) (state.Namespace, state.CredentialSource, error) {
	ns, err := s.namespace(r)
	if err != nil {
		return ns, state.CredentialSource{}, err
	}
	ref := r.PathValue("cred")
	m := s.b.Machine()
	find := func() (state.CredentialSource, bool) {
		if c, ok := m.CredentialSource(ref); ok && c.NamespaceID == ns.ID {
			return c, true
		}
		return m.CredentialSourceByName(ns.ID, ref)
	}
	c, ok, behind := lookupValue(r.Context(), s, find)
	name := ref
	if ok {
		name = c.Name
	}
	if err := s.allow(r, act, credRes(ns, name), ns.ID); err != nil {
		return ns, c, err
	}
	if !ok {
		return ns, c, s.missing(notFound("credential source %q not found in namespace %q", ref, ns.Name), behind)
	}
	return ns, c, nil
}

func (s *server) getCredential(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.credentialFor(r, iam.ViewCredentialSource)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireCredentialSource(c))
	return nil
}

// credentialStore is the compute driver's store, or a 409 naming why a
// value cannot be kept.
func (s *server) credentialStore() (compute.CredentialStore, error) {
	var st compute.CredentialStore
	if d := s.b.Driver(); d != nil {
		st = compute.StoreOf(d)
	}
	if st == nil {
		e := conflict("this installation's compute driver keeps no credential values")
		e.Details = map[string]any{"reason": string(codes.CredentialStoreUnavailable)}
		return nil, e
	}
	return st, nil
}

// storeFailed is the answer of a store that could not write or read.
func storeFailed(what string, err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: codes.Internal,
		Message: fmt.Sprintf("the compute driver could not %s the credential value: %v", what, err),
		Details: map[string]any{"reason": string(codes.CredentialStoreUnavailable), "retryable": true}}
}

// credentialValues checks the values of a request: exactly one of values
// and from; 1 to wire.MaxCredentialKeys keys of Secret key syntax; each
// value non-empty, at most wire.MaxCredentialValueBytes and free of
// control characters other than tab and line ends (a JSON key file is a
// value too). Messages never quote a value.
func credentialValues(values map[string]string, from string) (map[string][]byte, error) {
	if (len(values) == 0) == (from == "") {
		return nil, invalid("give exactly one of values and from")
	}
	if from != "" {
		if len(from) > state.MaxCredentialLocation || strings.IndexFunc(from, unicode.IsSpace) >= 0 {
			return nil, invalid("from must be a location without spaces, at most %d bytes", state.MaxCredentialLocation)
		}
		return nil, nil
	}
	if len(values) > wire.MaxCredentialKeys {
		return nil, invalid("a credential source holds at most %d keys", wire.MaxCredentialKeys)
	}
	out := make(map[string][]byte, len(values))
	for k, v := range values {
		if !credref.ValidKey(k) {
			return nil, invalid("credential key %q may hold letters, digits, '-', '_' and '.' (at most 253)", k)
		}
		if v == "" || len(v) > wire.MaxCredentialValueBytes {
			return nil, invalid("the value of key %q must be 1 to %d bytes", k, wire.MaxCredentialValueBytes)
		}
		if strings.ContainsFunc(v, func(r rune) bool {
			return !strings.ContainsRune("\t\n\r", r) && unicode.IsControl(r) || r == unicode.ReplacementChar
		}) {
			return nil, invalid("the value of key %q holds control characters or invalid UTF-8", k)
		}
		out[k] = []byte(v)
	}
	return out, nil
}

// valuesOf is what a write stores: the request's values, or what a
// registration reads at its location (its permission is a cluster
// admin's: RegisterCredentialSource on the source).
func (s *server) valuesOf(r *http.Request, st compute.CredentialStore, ns state.Namespace, name string,
	values map[string]string, from string) (map[string][]byte, error) {
	vals, err := credentialValues(values, from)
	if err != nil || from == "" {
		return vals, err
	}
	if err := s.allow(r, iam.RegisterCredentialSource, credRes(ns, name), ns.ID); err != nil {
		return nil, err
	}
	vals, err = st.ReadLocation(r.Context(), ns, from)
	switch {
	case errors.Is(err, compute.ErrLocationInvalid):
		e := invalid("%v", err)
		e.Details = map[string]any{"reason": string(codes.CredentialLocationRefused)}
		return nil, e
	case errors.Is(err, compute.ErrLocationRefused):
		e := forbidden(iam.RegisterCredentialSource, credRes(ns, name), nil)
		e.Message = err.Error()
		e.Details["reason"] = string(codes.CredentialLocationRefused)
		s.auditRefusal(r, iam.RegisterCredentialSource, credRes(ns, name), auditAt{ns: ns.ID}, codes.CredentialLocationRefused,
			map[string]string{"from": truncate(from, 256)})
		return nil, e
	case errors.Is(err, compute.ErrLocationNotFound):
		e := notFound("%v", err)
		e.Details = map[string]any{"reason": string(codes.CredentialSourceNotFound)}
		return nil, e
	case err != nil:
		return nil, storeFailed("read", err)
	}
	if len(vals) > wire.MaxCredentialKeys {
		return nil, invalid("the location holds %d keys; a credential source holds at most %d (name one key)", len(vals), wire.MaxCredentialKeys)
	}
	for k := range vals {
		if !credref.ValidKey(k) {
			return nil, invalid("the location's key %q is not a credential key", k)
		}
	}
	return vals, nil
}

func keysOf(v map[string][]byte) []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// putValues writes the values of a create or a rotation through the
// driver's store under the credential lock, which it returns held (unlock)
// so the caller commits the metadata before another write of a source
// starts. version, called under the lock, reads the state as it is then
// and names the version to write, or refuses.
func (s *server) putValues(r *http.Request, ns state.Namespace, name string, values map[string]string, from string,
	version func() (int64, error)) (keys []string, unlock func(), err error) {
	if _, err := credentialValues(values, from); err != nil {
		return nil, nil, err
	}
	st, err := s.credentialStore()
	if err != nil {
		return nil, nil, err
	}
	s.credMu.Lock()
	defer func() {
		if err != nil {
			s.credMu.Unlock()
		}
	}()
	v, err := version()
	if err != nil {
		return nil, nil, err
	}
	vals, err := s.valuesOf(r, st, ns, name, values, from)
	if err != nil {
		return nil, nil, err
	}
	if isDryRun(r) {
		// A dry run stores nothing: the metadata goes to its private copy
		// of the state, the value nowhere.
		return keysOf(vals), s.credMu.Unlock, nil
	}
	if err := st.PutCredential(r.Context(), ns, name, v, vals); err != nil {
		return nil, nil, storeFailed("store", err)
	}
	return keysOf(vals), s.credMu.Unlock, nil
}

// createCredential creates (values) or registers (from) a source: the value
// goes to the driver's store, then the metadata to the log.
func (s *server) createCredential(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateCredentialSource
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	if err := s.allow(r, iam.CreateCredentialSource, credRes(ns, req.Name), ns.ID); err != nil {
		return err
	}
	if err := validName("credential source", req.Name); err != nil {
		return err
	}
	keys, unlock, err := s.putValues(r, ns, req.Name, req.Values, req.From, func() (int64, error) {
		if _, ok := s.b.Machine().CredentialSourceByName(ns.ID, req.Name); ok {
			return 0, conflict("credential source name %q is taken in namespace %q", req.Name, ns.Name)
		}
		return 1, nil
	})
	if err != nil {
		return err
	}
	defer unlock()
	return commit(s, w, r, http.StatusCreated, answerCreateCredential, state.CreateCredentialSource{ID: newID(),
		NamespaceID: ns.ID, Name: req.Name, Keys: keys, RegisteredFrom: req.From})
}

// rotateCredential writes the source's next version, then commits it (a
// compare-and-set on the version the value was written as).
func (s *server) rotateCredential(w http.ResponseWriter, r *http.Request) error {
	var req wire.RotateCredentialSource
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, c, err := s.credentialFor(r, iam.RotateCredentialSource)
	if err != nil {
		return err
	}
	keys, unlock, err := s.putValues(r, ns, c.Name, req.Values, req.From, func() (int64, error) {
		cur, ok := s.b.Machine().CredentialSource(c.ID)
		if !ok {
			return 0, notFound("credential source %q was withdrawn", c.Name)
		}
		c = cur
		return c.Version + 1, nil
	})
	if err != nil {
		return err
	}
	defer unlock()
	return commit(s, w, r, http.StatusOK, answerRotateCredential, state.RotateCredentialSource{ID: c.ID,
		Version: c.Version + 1, Keys: keys, RegisteredFrom: req.From})
}

// withdrawCredential deletes the value, then the metadata. Agents whose
// reference names it can no longer deploy (running revisions keep the copy
// their workloads were given).
func (s *server) withdrawCredential(w http.ResponseWriter, r *http.Request) error {
	ns, c, err := s.credentialFor(r, iam.WithdrawCredentialSource)
	var nf *Error
	if errors.As(err, &nf) && nf.Status == http.StatusNotFound {
		// No metadata: remove a value a failed create may have left.
		if name := r.PathValue("cred"); ns.ID != "" && credref.ValidName(name) {
			if st, serr := s.credentialStore(); serr == nil {
				if derr := st.DeleteCredential(r.Context(), ns, name); derr != nil {
					s.log.Warn("credential cleanup failed", "namespace", ns.Name, "source", name, "error", derr.Error())
				}
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	st, err := s.credentialStore()
	if err != nil {
		return err
	}
	s.credMu.Lock()
	defer s.credMu.Unlock()
	if err := st.DeleteCredential(r.Context(), ns, c.Name); err != nil {
		return storeFailed("delete", err)
	}
	return commit(s, w, r, http.StatusOK, answerWithdrawCredential, state.WithdrawCredentialSource{ID: c.ID})
}

// referenceRefused answers a credential reference that cannot be used in
// its Agent's Namespace (policy.ReferenceRefused): 400, 403 or 404 with the
// code as details.reason; a refused write appends one audit record at at
// with its actor (the refusal changes nothing else).
func (s *server) referenceRefused(r *http.Request, at auditAt, act iam.Action, err error) error {
	var rr *policy.ReferenceRefused
	if !errors.As(err, &rr) {
		return err // nil included
	}
	var e *Error
	switch rr.Code {
	case codes.CrossNamespaceReference:
		e = forbidden(iam.UseCredentialSource, rr.Resource, nil)
		e.Message = "the credential reference names another Namespace's source: " + rr.Reason
	case codes.CredentialSourceNotFound:
		e = notFound("%s", rr.Reason)
		e.Details = map[string]any{"resource": rr.Resource.String()}
	default:
		e = invalid("harnessAuth.sourceRef: %s", rr.Reason)
		e.Details = map[string]any{}
	}
	e.Details["reason"] = string(rr.Code)
	e.Message = string(rr.Code) + ": " + e.Message // occ and the console show the closed reason
	s.auditRefusal(r, act, rr.Resource, at, rr.Code, nil)
	return e
}

// referenceInNamespace refuses, when an Agent is created or updated, a
// reference into another Namespace (audited at at as act); whether the
// source exists is the deploy's question (sources may come later).
func (s *server) referenceInNamespace(r *http.Request, ns state.Namespace, h *wire.HarnessAuth, at auditAt, act iam.Action) error {
	if h == nil || h.SourceRef == "" {
		return nil
	}
	_, err := policy.InNamespace(ns, h.SourceRef)
	return s.referenceRefused(r, at, act, err)
}
