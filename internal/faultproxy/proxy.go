package faultproxy

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Mode is what a Proxy does with a connection's traffic.
type Mode int

const (
	// Pass forwards every byte both ways as it comes.
	Pass Mode = iota
	// Stall holds what the client sends: nothing reaches the server and
	// nothing is answered, as with a hung server, until the mode changes;
	// then what is held is forwarded, in order. A request held when its
	// client gives up (closes the connection) never reaches the server.
	Stall
	// Delay forwards requests but holds the server's replies until the
	// mode changes: the server has acted on a request whose reply the
	// client has not seen. A reply held when its client gives up is lost.
	Delay
	// Drop closes the connections it is set on; with the proxy's mode,
	// every connection, and each new one as soon as it is accepted.
	Drop
	// Refuse is Drop that also closes the proxy's listener: new
	// connections are refused, as by a stopped server, until the mode
	// changes (the proxy listens again on the same address). It is a mode
	// of the whole proxy only.
	Refuse
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Stall:
		return "stall"
	case Delay:
		return "delay"
	case Drop:
		return "drop"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// waitLimit bounds how long Proxy's Wait methods wait for what they wait
// for before they fail the test: generous, it is never reached unless the
// awaited event does not come.
const waitLimit = 20 * time.Second

// A Proxy is a TCP proxy to a server (a redis-server) whose faults a test
// switches at the step it chooses: it holds requests (Stall) or replies
// (Delay) until the test releases them, closes connections (Drop) or
// refuses new ones (Refuse). Nothing in it runs on a timer. Its connections
// are numbered from 0 in the order it accepts them; Conn switches one
// connection's mode apart from the others.
//
// Its methods are safe for concurrent use; those that take no testing.TB
// fail the test of NewProxy, and must be called from its goroutine.
type Proxy struct {
	// Addr is the proxy's host:port on 127.0.0.1, for the client.
	Addr string

	t      testing.TB
	target string

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced at every change of state
	mode     Mode
	ln       net.Listener // nil while refusing
	conns    []*Conn
	accepted int // connections accepted (Drop and Refuse count too)
	closed   bool
	wg       sync.WaitGroup
}

// NewProxy starts a proxy on a free port of 127.0.0.1 to target (host:port)
// in mode Pass; the test's cleanup closes it.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), t: t, target: target, ln: ln, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept(ln)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// changedLocked wakes the goroutines waiting for a change, under p.mu.
func (p *Proxy) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed: Refuse or Close
		}
		p.mu.Lock()
		p.accepted++
		if p.closed || p.mode == Drop || p.mode == Refuse {
			p.changedLocked()
			p.mu.Unlock()
			c.Close()
			continue
		}
		conn := &Conn{p: p, id: len(p.conns), client: c}
		p.conns = append(p.conns, conn)
		p.changedLocked()
		p.wg.Add(1)
		p.mu.Unlock()
		go conn.dial()
	}
}

// SetMode sets the mode of every connection that has none of its own
// (see Conn.SetMode), and of those accepted from now on. Leaving Stall or
// Delay forwards what was held; leaving Refuse listens again on Addr.
func (p *Proxy) SetMode(m Mode) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.t.Fatalf("redistest: proxy %s: SetMode(%v) after Close", p.Addr, m)
	}
	if m == p.mode {
		return
	}
	if p.mode == Refuse {
		ln, err := net.Listen("tcp", p.Addr)
		if err != nil {
			p.t.Fatalf("redistest: proxy %s: listening again after Refuse: %v", p.Addr, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
	p.mode = m
	if m == Refuse {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		if c.mode == nil && (m == Drop || m == Refuse) {
			c.closeLocked()
		}
	}
	p.changedLocked()
}

// Release forwards everything held and returns to Pass: SetMode(Pass).
func (p *Proxy) Release() { p.t.Helper(); p.SetMode(Pass) }

// Accepted returns how many connections the proxy has accepted, those
// it closed at once (Drop) included.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Held returns how many chunks of bytes (requests or replies, as read)
// are held now by Stall or Delay, over all connections.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldLocked()
}

func (p *Proxy) heldLocked() int {
	n := 0
	for _, c := range p.conns {
		if c.closed {
			continue
		}
		m := c.modeLocked()
		if m == Stall {
			n += len(c.up.q)
		}
		if m == Delay {
			n += len(c.down.q)
		}
	}
	return n
}

// WaitHeld waits until at least n chunks are held (Held), failing the test
// after waitLimit.
func (p *Proxy) WaitHeld(n int) {
	p.t.Helper()
	p.wait(fmt.Sprintf("%d held", n), func() bool { return p.heldLocked() >= n })
}

// WaitAccepted waits until the proxy has accepted at least n connections
// (Accepted), failing the test after waitLimit.
func (p *Proxy) WaitAccepted(n int) {
	p.t.Helper()
	p.wait(fmt.Sprintf("%d accepted", n), func() bool { return p.accepted >= n })
}

// WaitClosed waits until the connection is closed (by either end, or by
// the proxy), failing the test after waitLimit.
func (c *Conn) WaitClosed() {
	c.p.t.Helper()
	c.p.wait("connection "+strconv.Itoa(c.id)+" closed", func() bool { return c.closed })
}

// wait waits until cond (under p.mu) holds.
func (p *Proxy) wait(what string, cond func() bool) {
	p.t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		p.mu.Lock()
		ok, ch := cond(), p.changed
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-limit.C:
			p.mu.Lock()
			defer p.mu.Unlock()
			p.t.Fatalf("redistest: proxy %s: not %s after %v (mode %v, %d accepted, %d held)", p.Addr, what, waitLimit,
				p.mode, p.accepted, p.heldLocked())
		}
	}
}

// Conn returns the proxy's connection number i (from 0, in the order they
// were accepted), failing the test if there is none such yet.
func (p *Proxy) Conn(i int) *Conn {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 || i >= len(p.conns) {
		p.t.Fatalf("redistest: proxy %s: no connection %d (%d accepted and kept)", p.Addr, i, len(p.conns))
		return nil
	}
	return p.conns[i]
}

// Close closes the listener and every connection, dropping what is held,
// and waits for the proxy's goroutines to exit. Calls after the first do
// nothing and return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	for _, c := range p.conns {
		c.closeLocked()
	}
	p.changedLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// A Conn is one connection through a Proxy.
type Conn struct {
	p      *Proxy
	id     int
	client net.Conn
	server net.Conn // nil until dialled
	mode   *Mode    // nil: the proxy's
	closed bool
	up     pipe // client to server
	down   pipe // server to client
}

// pipe is one direction of a Conn: chunks read and not yet written.
type pipe struct {
	q   [][]byte
	eof bool
}

// SetMode sets this connection's own mode (Pass, Stall, Delay or Drop),
// whatever the proxy's; leaving Stall or Delay forwards what was held.
func (c *Conn) SetMode(m Mode) {
	p := c.p
	p.t.Helper()
	if m == Refuse {
		p.t.Fatalf("redistest: proxy %s: Refuse is a mode of the proxy, not of connection %d", p.Addr, c.id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.closed && m != Drop {
		p.t.Fatalf("redistest: proxy %s: SetMode(%v) on connection %d, which is closed", p.Addr, m, c.id)
	}
	c.mode = &m
	if m == Drop {
		c.closeLocked()
	}
	p.changedLocked()
}

func (c *Conn) modeLocked() Mode {
	if c.mode != nil {
		return *c.mode
	}
	return c.p.mode
}

// heldLocked reports whether the direction up (client to server) or down
// is held now.
func (c *Conn) heldLocked(up bool) bool {
	m := c.modeLocked()
	return up && m == Stall || !up && m == Delay
}

// closeLocked closes both ends, under p.mu.
func (c *Conn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	c.up.q, c.down.q = nil, nil
	c.client.Close()
	if c.server != nil {
		c.server.Close()
	}
}

// dial connects to the target and starts the four pumps; a target that
// refuses closes the client's connection.
func (c *Conn) dial() {
	p := c.p
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, waitLimit)
	p.mu.Lock()
	if err != nil || c.closed {
		c.closeLocked()
		p.changedLocked()
		p.mu.Unlock()
		if s != nil {
			s.Close()
		}
		return
	}
	c.server = s
	p.wg.Add(4)
	p.mu.Unlock()
	go c.read(c.client, &c.up)
	go c.write(s, &c.up, true)
	go c.read(s, &c.down)
	go c.write(c.client, &c.down, false)
}

// read queues what src sends on d until it ends.
func (c *Conn) read(src net.Conn, d *pipe) {
	p := c.p
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		if n > 0 && !c.closed {
			d.q = append(d.q, append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			d.eof = true
		}
		p.changedLocked()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// write writes what d queued to dst while the direction is not held; when
// d's source has ended and nothing can be written any more, it closes the
// connection (what is held is dropped).
func (c *Conn) write(dst net.Conn, d *pipe, up bool) {
	p := c.p
	defer p.wg.Done()
	for {
		p.mu.Lock()
		held := c.heldLocked(up)
		switch {
		case c.closed:
			p.mu.Unlock()
			return
		case len(d.q) > 0 && !held:
			chunk := d.q[0]
			d.q = d.q[1:]
			p.changedLocked()
			p.mu.Unlock()
			if _, err := dst.Write(chunk); err != nil {
				p.mu.Lock()
				c.closeLocked()
				p.changedLocked()
				p.mu.Unlock()
				return
			}
			continue
		case d.eof && (len(d.q) == 0 || held):
			c.closeLocked()
			p.changedLocked()
			p.mu.Unlock()
			return
		}
		ch := p.changed
		p.mu.Unlock()
		<-ch
	}
}
