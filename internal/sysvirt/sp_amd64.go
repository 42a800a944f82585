package sysvirt

import "golang.org/x/sys/unix"

// stackPointer reads a stopped tracee's stack pointer.
func stackPointer(pid int) (uint64, error) {
	var regs unix.PtraceRegs
	if err := unix.PtraceGetRegs(pid, &regs); err != nil {
		return 0, err
	}
	return regs.Rsp, nil
}
