package procnet

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestTCP: a listener and a connection of this process are in the tables,
// with their addresses, state and owner.
func TestTCP(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"tcp4", "tcp6"} {
		host := "127.0.0.1:0"
		if network == "tcp6" {
			host = "[::1]:0"
		}
		l, err := net.Listen(network, host)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		c, err := net.Dial(network, l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		lap := netip.MustParseAddrPort(l.Addr().String())
		cap := netip.MustParseAddrPort(c.LocalAddr().String())
		var listening, connected bool
		for _, s := range TCP() {
			listening = listening || (s.Local == lap && s.State == Listen && s.UID == os.Geteuid())
			connected = connected || (s.Local == cap && s.Remote == lap && s.UID == os.Geteuid())
		}
		if !listening || !connected {
			t.Errorf("%s: listener %v found %v, connection %v found %v", network, lap, listening, cap, connected)
		}
	}
}
