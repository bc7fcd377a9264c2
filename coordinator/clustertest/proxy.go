// Package clustertest runs real coordinator processes as a cluster for
// process-level tests and benchmarks, with a cuttable TCP proxy in front of
// every member's Raft port.
package clustertest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections from its listener to a target. It can be
// cut (every connection dropped, new ones refused) or told to refuse
// connections from given source IPs, which — with members dialing from
// their own loopback IPs — isolates one member from another.
type Proxy struct {
	ln     net.Listener
	target string

	dropAnswer atomic.Bool // drop the next bytes the target sends back

	mu      sync.Mutex
	cut     bool
	blocked map[string]bool
	conns   map[*pair]struct{}
	closed  bool
	wg      sync.WaitGroup
}

type pair struct {
	src     string // source IP of the client side
	in, out net.Conn
	once    sync.Once
}

func (p *pair) close() {
	p.once.Do(func() {
		_ = p.in.Close()
		_ = p.out.Close()
	})
}

// NewProxy listens on listen and forwards to target.
func NewProxy(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, blocked: map[string]bool{}, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func srcIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

func (p *Proxy) allowed(src string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && !p.cut && !p.blocked[src]
}

func (p *Proxy) handle(in net.Conn) {
	defer p.wg.Done()
	src := srcIP(in)
	if !p.allowed(src) {
		_ = in.Close()
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	pr := &pair{src: src, in: in, out: out}
	p.mu.Lock()
	if p.closed || p.cut || p.blocked[src] {
		p.mu.Unlock()
		pr.close()
		return
	}
	p.conns[pr] = struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { p.answer(pr); done <- struct{}{} }()
	<-done
	pr.close()
	<-done
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

// answer copies what the target sends back, unless DropNextAnswer armed a
// drop: then the first chunk is discarded and the connection broken.
func (p *Proxy) answer(pr *pair) {
	buf := make([]byte, 32<<10)
	for {
		n, err := pr.out.Read(buf)
		if n > 0 {
			if p.dropAnswer.CompareAndSwap(true, false) {
				pr.close()
				return
			}
			if _, werr := pr.in.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// DropNextAnswer makes the proxy discard the next bytes the target sends
// back on any connection and break that connection: the request reached the
// target, its answer is lost.
func (p *Proxy) DropNextAnswer() { p.dropAnswer.Store(true) }

// dropWhere closes the tracked connections matching f; p.mu is held.
func (p *Proxy) dropWhere(f func(*pair) bool) {
	for pr := range p.conns {
		if f(pr) {
			pr.close()
		}
	}
}

// Cut drops every connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.dropWhere(func(*pair) bool { return true })
}

// Block drops connections from source IP ip and refuses new ones.
func (p *Proxy) Block(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[ip] = true
	p.dropWhere(func(pr *pair) bool { return pr.src == ip })
}

// Heal undoes Cut and every Block.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.blocked = map[string]bool{}
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.dropWhere(func(*pair) bool { return true })
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}
