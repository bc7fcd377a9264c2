package openclawschema

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

type execCmd = exec.Cmd

func plainCommand(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

// cliTimeout bounds one CLI run (a cold `openclaw config schema` takes
// ~10 s on a small machine).
const cliTimeout = 2 * time.Minute

// startWait runs cmd in its own process group, killed with the group when
// ctx ends or cliTimeout passes.
func startWait(ctx context.Context, cmd *exec.Cmd) error {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
}
