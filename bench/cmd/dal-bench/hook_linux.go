package main

import (
	"github.com/cilium/ebpf/link"
)

// otherSysEnterHooks counts the programs attached to sys_enter by other
// processes: each one slows every syscall, bare baselines included.
func otherSysEnterHooks() (int, error) {
	var it link.Iterator
	defer it.Close()
	n := 0
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue
		}
		if rt := info.RawTracepoint(); rt != nil && rt.Name == "sys_enter" {
			n++
		}
	}
	return n, it.Err()
}
