// Package supervise starts and stops the child processes of oce's in-pod
// supervisors (gatewayd, harnessd, nodehost) the way a container init must:
//
//   - every child leads its own process group, and stop signals, stop budgets
//     and SIGKILL address the whole group, so grandchildren (node → codex) are
//     never orphaned by a stop;
//   - SIGTERM/SIGINT received by the supervisor are forwarded to every child's
//     group; after the child's named stop budget the group is killed; a second
//     stop signal kills at once;
//   - one process-wide, SIGCHLD-driven reaper collects every child status with
//     waitid/wait4 and hands the statuses of pids started here to their
//     waiters; when the process is PID 1 or a child subreaper it also reaps
//     orphaned grandchildren, so exec probes and double-forked daemons leave
//     no zombies;
//   - exit statuses are propagated as shell codes (code, or 128+signal), which
//     tini -e 143 maps back to 0 for a SIGTERM stop.
//
// Because the reaper waits for any child (wait4(-1) semantics) once New has
// made the process a subreaper, a process that uses this package must start
// ALL its children through it (Start, Run or RunCommand) and never through
// os/exec: an os/exec child's status would be taken by the reaper. Processes
// that must also use os/exec set Options.NoSubreaper, which restricts the
// reaper to the pids started here.
package supervise
