package local

import (
	"os/exec"
	"syscall"

	"oce.dev/oce/shared/proc"
)

// startProc starts argv under tini (-s subreaper, -e 143: SIGTERM exit is
// success) in its own process group, logging to logFile (0600).
func startProc(tini, role string, argv, env []string, dir, logFile string) (*proc.Process, error) {
	cmd := exec.Command(tini, append([]string{"-s", "-e", "143", "--"}, argv...)...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return proc.Start(cmd, role, logFile)
}
