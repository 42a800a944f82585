// Command daldprobe is a hostile agent for dald's containment test: from
// inside a run it tries to open sessions on the socket it was given, to
// join its session without and with its token, and to reach dald's own
// socket (named by $PROBE_MAIN). It prints one line per attempt.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dal-runtime/dal/internal/wire"
)

func main() {
	sock, session := os.Getenv(wire.EnvSocket), os.Getenv("DAL_SESSION")
	token := os.Getenv(wire.EnvToken)
	if f := os.Getenv(wire.EnvTokenFile); token == "" && f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Println("token file:", err)
			os.Exit(1)
		}
		token = strings.TrimSpace(string(b))
	}
	opened := 0
	for range 20 {
		c, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
		if err != nil {
			continue
		}
		if _, err := c.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"}); err == nil {
			opened++
		}
		c.Close()
	}
	fmt.Println("sessions opened:", opened)
	_, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
	fmt.Println("exec hello:", short(err))
	_, _, err = wire.Dial(sock, wire.Request{Role: wire.RoleShim, Session: session})
	fmt.Println("shim without token:", short(err))
	c, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleShim, Session: session, Token: token, Runtime: "probe"})
	fmt.Println("shim with token:", short(err))
	if err == nil {
		st, err := c.Call(wire.Request{Op: wire.OpStatus})
		fmt.Println("status lists:", len(st.Sessions), "session(s)", short(err))
		c.Close()
	}
	_, _, err = wire.Dial(os.Getenv("PROBE_MAIN"), wire.Request{Role: wire.RoleExec})
	fmt.Println("dald's own socket:", short(err))
}

// short is err's first clause, or "ok".
func short(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, wire.ErrRemote) {
		s := err.Error()
		if i := strings.Index(s, ", for its processes only"); i >= 0 {
			return "refused: " + s[strings.Index(s, "this socket"):i]
		}
		if strings.Contains(s, "session token is missing") {
			return "refused: token missing"
		}
		return "refused: " + s
	}
	msg := err.Error()
	for _, e := range []string{"connection refused", "no such file or directory", "permission denied"} {
		if strings.Contains(msg, e) {
			return "cannot connect: " + e
		}
	}
	return "error: " + msg
}
