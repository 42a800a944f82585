package sysvirt

import "golang.org/x/sys/unix"

// stackPointer reads a stopped tracee's stack pointer.
func stackPointer(pid int) (uint64, error) {
	var regs unix.PtraceRegsArm64
	if err := unix.PtraceGetRegSetArm64(pid, 1 /* NT_PRSTATUS */, &regs); err != nil {
		return 0, err
	}
	return regs.Sp, nil
}
