// Package freeport picks a loopback port for a server that is about to
// be started (a sandboxed mariadbd, a proxy under test).
//
// Asking the kernel for port 0 and closing the listener, the usual way,
// hands out a port from the ephemeral range, the range the kernel also
// takes the local port of every outgoing connection from. Between the
// pick and the server's bind (a sandbox's mariadb-install-db takes
// seconds) any client on the machine may then get that port for its
// connection, and the server fails with "address already in use": seen
// in CI, where three test packages dial hundreds of connections at once.
// Ports below the ephemeral range are never given to outgoing
// connections, so a port picked there can only be taken by another
// process that binds it on purpose.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port handed out: well above the ports of
// well-known services.
const lowest = 10000

var (
	mu     sync.Mutex
	handed = map[int]bool{} // ports this process handed out already
)

// Port returns a loopback port that nothing listens on now and that the
// kernel does not give to outgoing connections, one this process has
// not handed out before.
func Port() (int, error) {
	lo, hi := candidates(ephemeralRange())
	mu.Lock()
	defer mu.Unlock()
	if hi > lo {
		for range 200 {
			p := lo + rand.IntN(hi-lo)
			if handed[p] || !bindable(p) {
				continue
			}
			handed[p] = true
			return p, nil
		}
	}
	// Every candidate was taken (or the ephemeral range covers all
	// ports): fall back to the kernel's choice.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	handed[p] = true
	return p, nil
}

// Addr is Port as "127.0.0.1:PORT".
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// candidates is the range [lo, hi) of ports to pick from: below the
// ephemeral range when it leaves at least 1,000 ports there, else above
// it.
func candidates(elo, ehi int) (lo, hi int) {
	if elo-lowest >= 1000 {
		return lowest, elo
	}
	if 65536-(ehi+1) >= 1000 {
		return ehi + 1, 65536
	}
	return 0, 0
}

// ephemeralRange is the kernel's local port range for outgoing
// connections; Linux's default where it cannot be read.
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	return parseRange(string(b), lo, hi)
}

func parseRange(s string, dlo, dhi int) (lo, hi int) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return dlo, dhi
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo < 1 || hi < lo || hi > 65535 {
		return dlo, dhi
	}
	return lo, hi
}

func bindable(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
