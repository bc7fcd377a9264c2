// Package contract is the runtime contract between oce's compute drivers
// (coordinator/compute/kubernetes renders it into Pod specs,
// coordinator/compute/local into process environments and files) and the
// supervisors they start (gatewayd, harnessd, nodehost): the topologies, the
// environment variable names, the secret file names, the ports and default
// in-container paths, and the status-server routes (with their bodies) the
// drivers call. docs/RUNTIME-CONTRACT.md explains each entry; this package
// is the only place their spelling lives, so a driver and a supervisor
// cannot drift apart.
//
// Closed codes are in shared/codes. The contract imports nothing of oce.
package contract
