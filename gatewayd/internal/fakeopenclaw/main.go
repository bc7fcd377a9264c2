// Command fakeopenclaw stands in for the openclaw CLI in gatewayd's unit
// tests. Like the real one (OPENCLAW.md §1.4, §1.5) `gateway run --port P`
// serves GET /readyz 200 on 127.0.0.1:P and exits 0 on SIGTERM; `doctor
// --fix --non-interactive` migrates and exits 0. Every call appends one line
// to $FAKEOC_RECORD. Knobs: FAKEOC_DOCTOR_EXIT (exit code), FAKEOC_DOCTOR_BLOCK=1
// (run until SIGTERM), FAKEOC_READY_DELAY (duration before /readyz is 200).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func record(line string) {
	p := os.Getenv("FAKEOC_RECORD")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

func main() {
	args := os.Args[1:]
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	switch {
	case len(args) >= 1 && args[0] == "doctor":
		record("doctor " + strings.Join(args[1:], " ") + " ro=" + os.Getenv("OPENCLAW_CONFIG_READONLY"))
		if os.Getenv("FAKEOC_DOCTOR_BLOCK") == "1" {
			<-sig
			record("doctor-sigterm")
			os.Exit(0)
		}
		code, _ := strconv.Atoi(os.Getenv("FAKEOC_DOCTOR_EXIT"))
		os.Exit(code)
	case len(args) >= 2 && args[0] == "gateway" && args[1] == "run":
		port := ""
		for i, a := range args {
			if a == "--port" && i+1 < len(args) {
				port = args[i+1]
			}
		}
		_, hasPw := os.LookupEnv("OPENCLAW_GATEWAY_PASSWORD")
		record(fmt.Sprintf("gateway pid=%d args=%s password=%v", os.Getpid(), strings.Join(args, " "), hasPw))
		delay, _ := time.ParseDuration(os.Getenv("FAKEOC_READY_DELAY"))
		readyAt := time.Now().Add(delay)
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			os.Exit(1)
		}
		go func() {
			_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/readyz" && time.Now().After(readyAt) {
					w.WriteHeader(200)
					_, _ = w.Write([]byte(`{"ready":true}`))
					return
				}
				w.WriteHeader(503)
			}))
		}()
		<-sig
		record(fmt.Sprintf("gateway-sigterm pid=%d", os.Getpid()))
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "fakeopenclaw: unsupported command")
		os.Exit(2)
	}
}
