package supervise

import (
	"fmt"
	"syscall"
)

// ExitStatus is how a child ended: with an exit code, or by a signal.
type ExitStatus struct {
	Code   int            // exit code; meaningful when Exited
	Signal syscall.Signal // terminating signal; meaningful when !Exited
	Exited bool           // true when the child called exit
}

func statusFrom(ws syscall.WaitStatus) ExitStatus {
	if ws.Signaled() {
		return ExitStatus{Signal: ws.Signal()}
	}
	return ExitStatus{Code: ws.ExitStatus(), Exited: true}
}

// ShellCode is the status a shell reports, and what a supervisor exits with
// to propagate it: the exit code, or 128+signal (143 for SIGTERM, which
// tini -e 143 maps to 0).
func (e ExitStatus) ShellCode() int {
	if e.Exited {
		return e.Code
	}
	return 128 + int(e.Signal)
}

// Success reports a zero exit code.
func (e ExitStatus) Success() bool { return e.Exited && e.Code == 0 }

// String describes the status for logs.
func (e ExitStatus) String() string {
	if e.Exited {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return fmt.Sprintf("signal %s", e.Signal)
}
