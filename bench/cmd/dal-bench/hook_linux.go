package main

import (
	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// attachEmptyHook attaches a program that does nothing to the sys_enter
// raw tracepoint: the least any syscall hook costs on this kernel.
func attachEmptyHook() (detach func(), err error) {
	prog, err := cebpf.NewProgram(&cebpf.ProgramSpec{Type: cebpf.RawTracepoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		return nil, err
	}
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: prog})
	if err != nil {
		prog.Close()
		return nil, err
	}
	return func() { l.Close(); prog.Close() }, nil
}

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
