// Package wire is the HTTP contract of the coordinator API (docs/API.md):
// every body a route accepts or answers, and the closed vocabularies those
// bodies carry. It is its own set of types, not the state machine's: the API
// can evolve without changing the Raft log encoding, and the encoding can
// change without breaking clients. coordinator/api converts at its edge;
// coordinator/client and occ use nothing else.
//
// wire imports only the standard library and shared/ (codes, contract).
package wire
