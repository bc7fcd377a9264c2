// Package abusetest is the standing abuse suite (issue 25): it starts a
// real one-member coordinator on loopback (Raft, the API, the console, an
// OIDC issuer) and drives bounded floods of hostile requests at it —
// refused writes with oversized names and documents, forged JWTs from many
// source addresses, token mints, idle and half-open connections, reads of
// missing names — asserting that raft.db, the audit log, the heap and the
// issuer's key-set fetches stay within their caps. Its benchmarks measure
// the figures docs/PERFORMANCE.md reports. The package holds only tests.
package abusetest
