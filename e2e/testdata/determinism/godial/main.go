// Command godial makes many fresh connections with Go's net.Dialer and its
// 30 s timeout: to a loopback echo server of its own, and through dal's
// proxy (HTTP_PROXY) with net/http. Under the syscall layer none may time
// out: the netpoller's wait must not jump while another thread is about to
// register the socket. It prints how many it made and how many failed.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	const n = 200
	failed := 0
	d := net.Dialer{Timeout: 30 * time.Second}
	for range n {
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			failed++
			fmt.Fprintln(os.Stderr, "dial:", err)
			continue
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		var b [4]byte
		if _, err := c.Write([]byte("ping")); err != nil {
			failed++
		} else if _, err := io.ReadFull(c, b[:]); err != nil {
			failed++
			fmt.Fprintln(os.Stderr, "read:", err)
		}
		c.Close()
	}
	fmt.Printf("dials %d\nfailed %d\n", n, failed)

	if os.Getenv("HTTP_PROXY") == "" {
		return
	}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}}
	failed = 0
	for range n {
		r, err := client.Get("http://0.0.0.0:9/") // through the proxy, which refuses it (403) at once
		if err != nil {
			failed++
			fmt.Fprintln(os.Stderr, "get:", err)
			continue
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	fmt.Printf("requests %d\nrequests_failed %d\n", n, failed)
}
