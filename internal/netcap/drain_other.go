//go:build !linux

package netcap

import (
	"net"
	"os"
	"time"
)

// diagSet finds client sockets on Linux only; elsewhere streamed pieces
// are written without waiting for the client to read them.
type diagSet struct{}

func newDiagSet() *diagSet { return &diagSet{} }

type peerSocket struct{}

func yield() {}

func nap(d time.Duration) { time.Sleep(d) }

func (*diagSet) watch(net.Conn) *peerSocket  { return nil }
func (*diagSet) close()                      {}
func (*diagSet) adopt(*os.File) error        { return nil }
func (*peerSocket) state() (peerState, bool) { return peerState{}, false }
func (*peerSocket) acked() bool              { return false }
func (*peerSocket) ours() int                { return endUnknown }
