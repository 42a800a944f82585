//go:build linux && (amd64 || arm64 || riscv64)

package netcap

import (
	"context"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// userfaultfd (linux/userfaultfd.h); the ioctl numbers are _IOWR(0xAA, nr,
// size), encoded alike on these architectures.
const (
	uffdAPI          = 0xAA
	uffdioAPI        = 0xC018AA3F // struct uffdio_api, 24 bytes
	uffdioRegister   = 0xC020AA00 // struct uffdio_register, 32 bytes
	uffdioZeropage   = 0xC020AA04 // struct uffdio_zeropage, 32 bytes
	uffdRegisterMiss = 1          // UFFDIO_REGISTER_MODE_MISSING
)

// TestDrainedSeesBytesArrivingDuringTheQuestion provokes, with real
// sockets, the race sock_diag has: the kernel reads the client socket's
// unread count (rcv_nxt - copied_seq) without its lock, then locks the
// socket for tcp_info's bytes_received. Bytes that reach the socket in
// between are counted as received and not as unread; a proxy believing
// that answer writes the next piece while the client has not read this
// one, and the client reads both at once.
//
// The window is made as wide as the test needs: the client is inside
// send(2) from a page that is not there yet (userfaultfd), so the kernel
// holds its socket locked while it waits for the page. The proxy's piece
// then waits in the socket's backlog; the proxy's question reads 0 unread
// and waits for the lock; the test supplies the page once that thread is
// seen blocked, the send ends, the backlog is processed, and the question
// ends with every byte received. drained must not take that for read.
func TestDrainedSeesBytesArrivingDuringTheQuestion(t *testing.T) {
	l := listen(t)
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cfd)
	port := l.Addr().(*net.TCPAddr).Port
	if err := unix.Connect(cfd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := &clientConn{Conn: sc, diag: newDiagSet()}
	defer c.diag.close()
	c.once.Do(func() { c.peer = c.diag.watch(c.Conn) })
	if c.peer == nil {
		t.Fatal("sock_diag does not see the client's socket")
	}

	// The first piece, written and read: nothing unread.
	one, two := "piece one", "piece two"
	if _, err := c.Write([]byte(one)); err != nil {
		t.Fatal(err)
	}
	readExactly(t, cfd, len(one))
	if d := c.drained(context.Background()); d != drainRead {
		t.Fatalf("drained: %v for a client that read everything", d)
	}

	// The client sends from a missing page and blocks, its socket locked.
	uffd, page := missingPage(t)
	sent := make(chan error, 1)
	go func() {
		_, err := unix.Write(cfd, page[:16])
		sent <- err
	}()
	var msg [32]byte // struct uffd_msg: the client faulted
	if _, err := unix.Read(uffd, msg[:]); err != nil {
		t.Fatalf("waiting for the client's fault: %v", err)
	}

	// The second piece reaches the client's backlog.
	if _, err := c.Write([]byte(two)); err != nil {
		t.Fatal(err)
	}
	asked := make(chan int, 1)  // the first question's thread
	again := make(chan bool, 1) // drained asked a second time
	questions := 0
	c.peer.beforeQuery = func() {
		questions++
		switch questions {
		case 1:
			asked <- unix.Gettid()
		case 2:
			again <- true
		}
	}
	type result struct {
		drained drain
		unread  int
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // the question is sent from the thread named
		defer runtime.UnlockOSThread()
		ok := c.drained(context.Background())
		n, _ := unix.IoctlGetInt(cfd, unix.SIOCINQ)
		done <- result{ok, n}
	}()
	tid := <-asked
	for !waitingForLock(t, tid) {
		select {
		case r := <-done:
			t.Fatalf("the question did not wait for the client's socket lock (drained %v, %d unread): this kernel does not lock in tcp_get_info", r.drained, r.unread)
		default:
			runtime.Gosched()
		}
	}
	// The page: the send ends, the socket is released, its backlog
	// processed, and the question answered.
	zero := struct{ start, len, mode, zeropage uint64 }{start: uint64(uintptr(unsafe.Pointer(&page[0]))), len: uint64(len(page))}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(uffd), uffdioZeropage, uintptr(unsafe.Pointer(&zero))); e != 0 {
		t.Fatalf("UFFDIO_ZEROPAGE: %v", e)
	}
	if err := <-sent; err != nil {
		t.Fatalf("the client's send: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("drained returned %v after one question while the client had %d bytes unread", r.drained, r.unread)
	case <-again:
	}
	readExactly(t, cfd, len(two))
	if r := <-done; r.drained != drainRead || r.unread != 0 {
		t.Errorf("drained %v with %d bytes unread, want drainRead once the client read the second piece", r.drained, r.unread)
	}
}

// readExactly reads n bytes from the client's socket fd.
func readExactly(t *testing.T, fd, n int) {
	t.Helper()
	buf := make([]byte, n)
	for got := 0; got < n; {
		m, err := unix.Read(fd, buf[got:])
		if err != nil || m == 0 {
			t.Fatalf("reading the client's socket: %d bytes, %v", m, err)
		}
		got += m
	}
}

// missingPage maps a page registered with a new userfaultfd: the first
// access to it waits until the test supplies it.
func missingPage(t *testing.T) (uffd int, page []byte) {
	t.Helper()
	r, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
	if e != 0 {
		t.Fatalf("userfaultfd (the test needs CAP_SYS_PTRACE for faults in the kernel): %v", e)
	}
	uffd = int(r)
	t.Cleanup(func() { unix.Close(uffd) })
	api := struct{ api, features, ioctls uint64 }{api: uffdAPI}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(uffd), uffdioAPI, uintptr(unsafe.Pointer(&api))); e != 0 {
		t.Fatalf("UFFDIO_API: %v", e)
	}
	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(page) })
	reg := struct{ start, len, mode, ioctls uint64 }{start: uint64(uintptr(unsafe.Pointer(&page[0]))), len: uint64(len(page)), mode: uffdRegisterMiss}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(uffd), uffdioRegister, uintptr(unsafe.Pointer(&reg))); e != 0 {
		t.Fatalf("UFFDIO_REGISTER: %v", e)
	}
	return uffd, page
}

// waitingForLock reports whether thread tid of this process sleeps
// uninterruptibly, as a socket call waiting for a socket's lock does.
func waitingForLock(t *testing.T, tid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] == "D"
}
