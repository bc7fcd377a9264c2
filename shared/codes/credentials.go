package codes

// Refusals of an Agent's credential reference (harnessAuth.sourceRef): the
// reference names a credential source of another oce Namespace, or one its
// own Namespace does not hold. The API answers them as details.reason of
// 403 FORBIDDEN and 404 NOT_FOUND (docs/API.md, "Credential sources"); the
// activation engine's reauthorization fails work with them.
const (
	// CrossNamespaceReference: the reference is qualified with another
	// Namespace (credential:<other>/<name>, secret://<other>/<name>#<key>).
	// A reference resolves only in its Agent's own Namespace.
	CrossNamespaceReference Code = "CROSS_NAMESPACE_REFERENCE"
	// CredentialSourceNotFound: the Agent's Namespace holds no credential
	// source of that name, or the source has no such key.
	CredentialSourceNotFound Code = "CREDENTIAL_SOURCE_NOT_FOUND"
	// CredentialReferenceInvalid: the reference is not in the reference
	// syntax (details.reason of 400 INVALID_REQUEST).
	CredentialReferenceInvalid Code = "CREDENTIAL_REFERENCE_INVALID"
	// CredentialStoreUnavailable: the compute driver keeps no credential
	// values, or could not read or write them (details.reason of a 409 or
	// 503 answer of the credential source routes).
	CredentialStoreUnavailable Code = "CREDENTIAL_STORE_UNAVAILABLE"
	// CredentialLocationRefused: a registration names a location that is
	// never a credential source: the coordinator's own Secrets, objects oce
	// manages, another Namespace's runtime namespaces.
	CredentialLocationRefused Code = "CREDENTIAL_LOCATION_REFUSED"
)
