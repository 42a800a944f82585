//go:build !linux

package netcap

import "net/netip"

// watch lists the host's addresses once: elsewhere than Linux, those
// present when the proxy started are the host's own.
func (r *reach) watch() (stop func(), err error) { return func() {}, r.refresh() }

// isLocal has no probe here.
func isLocal(netip.Addr) bool { return false }
