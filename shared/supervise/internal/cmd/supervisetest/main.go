// Command supervisetest is the test program of package supervise: run as a
// supervisor it uses the package the way gatewayd/harnessd do; run as a child
// it plays the misbehaving processes the tests need. Built by the package's
// TestMain; not shipped.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"oce.dev/oce/shared/supervise"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: supervisetest <mode> …")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "supervise":
		superviseMode(args)
	case "hold":
		holdMode()
	case "exit":
		os.Exit(atoi(arg(args, 0)))
	case "ignore-term":
		ignoreTerm(atoi(arg(args, 0)))
	case "orphans":
		orphans(atoi(arg(args, 0)), atoi(arg(args, 1)))
	case "secret-wait":
		secretWait(arg(args, 0))
	case "spew":
		spew(atoi(arg(args, 0)), arg(args, 1) == "block")
	case "escape":
		escape(arg(args, 0))
	case "echo-stdin":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	default:
		fail("unknown mode " + os.Args[1])
	}
}

// superviseMode: supervise [-budget d] [-linger] [-listen addr] [-no-subreaper] -- prog args…
// Prints "READY pid=… child=…" once the child runs (and the listener, if
// any, is bound), "CHILD-EXITED code=…" when it ends, and exits with the
// child's shell code; with -linger it first holds until a stop signal and
// prints "EXIT reaped=…".
func superviseMode(args []string) {
	fs := flag.NewFlagSet("supervise", flag.ExitOnError)
	budget := fs.Duration("budget", supervise.CodexStopBudget, "stop budget")
	linger := fs.Bool("linger", false, "hold after the child exits")
	listen := fs.String("listen", "", "TCP address to listen on before READY")
	noSub := fs.Bool("no-subreaper", false, "do not become a child subreaper")
	_ = fs.Parse(args)
	rest := fs.Args()
	if len(rest) == 0 {
		fail("supervise: no program")
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	s, err := supervise.New(supervise.Options{Log: log, NoSubreaper: *noSub})
	if err != nil {
		fail(err.Error())
	}
	ctx := context.Background()
	p, err := s.Start(ctx, supervise.Spec{Name: "child", Path: rest[0], Args: rest[1:],
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, StopBudget: *budget})
	if err != nil {
		fail(err.Error())
	}
	addr := ""
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fail(err.Error())
		}
		defer ln.Close()
		addr = " addr=" + ln.Addr().String()
	}
	fmt.Printf("READY pid=%d child=%d%s\n", os.Getpid(), p.Pid(), addr)
	st, err := p.Wait(ctx)
	if err != nil {
		fail(err.Error())
	}
	fmt.Printf("CHILD-EXITED code=%d\n", st.ShellCode())
	if *linger {
		_ = s.Hold(ctx)
		fmt.Printf("EXIT reaped=%d\n", supervise.ReapedOrphans())
	}
	os.Exit(st.ShellCode())
}

// holdMode holds like a failed startup: alive, until SIGTERM, then exit 0.
func holdMode() {
	s, err := supervise.New(supervise.Options{})
	if err != nil {
		fail(err.Error())
	}
	fmt.Printf("READY pid=%d\n", os.Getpid())
	if err := s.Hold(context.Background()); err != nil {
		fail(err.Error())
	}
	select {
	case sig := <-s.Signals():
		fmt.Printf("HELD-RETURN signal=%s\n", sig)
	default:
		fail("Hold returned without a published signal")
	}
	os.Exit(0)
}

// ignoreTerm ignores SIGTERM (reporting each), starts n grandchildren in its
// own group that do the same, prints "PIDS <own> <grandchildren…>" once all
// are armed, and blocks.
func ignoreTerm(n int) {
	term := make(chan os.Signal, 4)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		for range term {
			fmt.Printf("GOT-TERM pid=%d\n", os.Getpid())
		}
	}()
	pids := []string{strconv.Itoa(os.Getpid())}
	for range n {
		pr, pw, err := os.Pipe()
		if err != nil {
			fail(err.Error())
		}
		proc, err := os.StartProcess("/proc/self/exe", []string{os.Args[0], "ignore-term", "0"},
			&os.ProcAttr{Files: []*os.File{nil, pw, os.Stderr}})
		if err != nil {
			fail(err.Error())
		}
		pw.Close()
		br := bufio.NewReader(pr)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "PIDS ") {
			fail("grandchild did not arm")
		}
		// Relay the grandchild's later lines (GOT-TERM); closing the pipe
		// would kill it with SIGPIPE instead of letting it ignore SIGTERM.
		go func() { _, _ = io.Copy(os.Stdout, br) }()
		pids = append(pids, strconv.Itoa(proc.Pid))
	}
	fmt.Printf("PIDS %s\n", strings.Join(pids, " "))
	block()
}

// orphans starts n short-lived processes it never waits for and exits with
// code: even ones run /bin/true in its group, odd ones run sleep 0.1 in a
// new session (double-fork style daemons that escape the group). All of
// them become orphans of the nearest subreaper.
func orphans(n, code int) {
	for i := range n {
		argv, attr := []string{"/bin/true"}, &syscall.SysProcAttr{}
		if i%2 == 1 {
			argv, attr = []string{"/bin/sleep", "0.1"}, &syscall.SysProcAttr{Setsid: true}
		}
		if _, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Sys: attr}); err != nil {
			fail(err.Error())
		}
	}
	os.Exit(code)
}

// escape starts `sleep <secs>` in a new session (outside the group) that
// inherits stdout, then exits: the pipe stays open after the leader is gone.
func escape(secs string) {
	_, err := syscall.ForkExec("/bin/sleep", []string{"/bin/sleep", secs},
		&syscall.ProcAttr{Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		fail(err.Error())
	}
	fmt.Println("leader-done")
}

// secretWait reads stdin, writes "<pid> <sha256>" to file, and blocks.
func secretWait(file string) {
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err.Error())
	}
	sum := sha256.Sum256(b)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %s", os.Getpid(), hex.EncodeToString(sum[:])), 0o600); err != nil {
		fail(err.Error())
	}
	if err := os.Rename(tmp, file); err != nil {
		fail(err.Error())
	}
	block()
}

// spew writes n bytes of 'x' to stdout, then blocks or exits 0.
func spew(n int, blockAfter bool) {
	buf := []byte(strings.Repeat("x", 4096))
	for n > 0 {
		k := min(n, len(buf))
		if _, err := os.Stdout.Write(buf[:k]); err != nil {
			os.Exit(2)
		}
		n -= k
	}
	if blockAfter {
		block()
	}
}

func block() {
	for {
		time.Sleep(time.Hour)
	}
}

func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail("bad number " + strconv.Quote(s))
	}
	return n
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "supervisetest:", msg)
	os.Exit(111)
}
