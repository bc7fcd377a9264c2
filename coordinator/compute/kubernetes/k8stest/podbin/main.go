// Command podbin is the static test program the k8stest harness packs into
// FROM-scratch OCI images for its real node: the Pod sandbox ("pause"), a
// tiny HTTP workload ("serve") with an exec probe ("probe"), and a
// supervisor stand-in that holds a startup failure through oce's real
// status server ("held", probed with "ready" exactly as gatewayd and
// harnessd are). Logs are plain lines on stdout.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/status"
)

func main() {
	mode := "serve"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "pause":
		os.Exit(pause())
	case "serve":
		os.Exit(serve())
	case "probe":
		os.Exit(probe(os.Args[2:]))
	case "held":
		os.Exit(held())
	case "stat":
		os.Exit(stat(os.Args[2:]))
	case "resolve":
		os.Exit(resolve(os.Args[2:]))
	case "write":
		os.Exit(write(os.Args[2:]))
	case "ready":
		os.Exit(status.RunReadyProbe(context.Background(), statusAddr(), os.Stdout))
	default:
		fmt.Fprintln(os.Stderr, "usage: podbin pause|serve|probe URL|held|ready|write PATH TEXT|resolve NAME|stat PATH")
		os.Exit(2)
	}
}

// pause blocks until SIGTERM or SIGINT, as a sandbox's pause process does.
func pause() int {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
	return 0
}

// serve answers GET /healthz and GET / on $PORT (default 8080) and, on
// SIGTERM, logs "podbin: SIGTERM received" and exits 0. With
// $OCE_STATUS_ADDR it also serves oce's status server, started and ready.
func serve() int {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "podbin %s\n", host) })
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	if addr := os.Getenv("OCE_STATUS_ADDR"); addr != "" {
		// Stand in for a supervisor that started: oce's status server, ready,
		// so the rendered startup and readiness probes pass.
		st := status.New(status.Options{Addr: addr, Component: "podbin"})
		st.SetStarted()
		st.SetReady(true)
		sctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() { _ = st.ListenAndServe(sctx) }()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("podbin: serving on :%s as pid %d uid %d\n", port, os.Getpid(), os.Getuid())
	select {
	case sig := <-ch:
		fmt.Printf("podbin: %s received\n", strings.ToUpper(unixName(sig)))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		fmt.Println("podbin: stopped")
		return 0
	case err := <-errc:
		fmt.Printf("podbin: serve: %v\n", err)
		return 1
	}
}

func unixName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "sigterm"
	case syscall.SIGINT:
		return "sigint"
	}
	return sig.String()
}

// probe exits 0 when GET url answers 200 within 2 s.
func probe(args []string) int {
	if len(args) != 1 {
		return 2
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Println(resp.Status)
		return 1
	}
	return 0
}

func statusAddr() string {
	if a := os.Getenv("OCE_STATUS_ADDR"); a != "" {
		return a
	}
	return status.DefaultAddr
}

// held serves oce's status server with a held startup failure
// ($HELD_CODE at check $HELD_CHECK, as a supervisor holds a bad key) and
// counts every GET /readyz it answers, so a test can tell probes from restarts.
func held() int {
	code := codes.Code(os.Getenv("HELD_CODE"))
	if code == "" {
		code = codes.AuthenticationFailed
	}
	check := os.Getenv("HELD_CHECK")
	if check == "" {
		check = "model-probe"
	}
	st := status.New(status.Options{Addr: statusAddr(), Component: "gateway"})
	st.Hold(status.RuntimeFailure{Check: check, Code: code})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Printf("podbin: holding %s at %s as pid %d\n", code, check, os.Getpid())
	if err := st.ListenAndServe(ctx); err != nil && ctx.Err() == nil {
		fmt.Printf("podbin: status server: %v\n", err)
		return 1
	}
	fmt.Println("podbin: SIGTERM received")
	return 0
}

// write creates PATH with TEXT (mode 0600) and prints its owner, so a test
// can check a volume is writable by the Pod's user.
func write(args []string) int {
	if len(args) != 2 {
		return 2
	}
	if err := os.WriteFile(args[0], []byte(args[1]), 0o600); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("wrote %s as uid %d gid %d\n", args[0], os.Getuid(), os.Getgid())
	return 0
}

// resolve prints the addresses of NAME (the Pod's resolv.conf: the
// cluster's DNS).
func resolve(args []string) int {
	if len(args) != 1 {
		return 2
	}
	addrs, err := net.LookupHost(args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(strings.Join(addrs, " "))
	return 0
}

// stat prints how PATH is delivered: "mode=0440 uid=0 gid=1000
// symlink=true" (mode, owner and group of the file it resolves to; whether
// PATH itself is a symlink, as Secret volume entries are).
func stat(args []string) int {
	if len(args) != 1 {
		return 2
	}
	lst, err := os.Lstat(args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	st, err := os.Stat(args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	sys := st.Sys().(*syscall.Stat_t)
	fmt.Printf("mode=%04o uid=%d gid=%d symlink=%t\n", st.Mode().Perm(), sys.Uid, sys.Gid, lst.Mode()&os.ModeSymlink != 0)
	return 0
}
