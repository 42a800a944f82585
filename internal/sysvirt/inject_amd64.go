package sysvirt

import (
	"errors"

	"github.com/dal-runtime/dal/internal/sysvirt/vdso"
	"golang.org/x/sys/unix"
)

// vdsoImage is dal's vDSO for this architecture.
var vdsoImage = vdso.Image

// errGone is a task that ended (or began to) while dal was injecting a
// call into it: its wait status is handed back to the trace loop.
var errGone = errors.New("the program ended")

// injected is what an injection saw besides its result.
type injected struct {
	// sig is a signal the task received meanwhile, to deliver when it
	// goes on (0 for none).
	sig int
	// gone is the wait status of a task that ended or stopped at its
	// exit, for the trace loop to act on.
	gone *unix.WaitStatus
}

// syscallInsn finds a syscall instruction in the kernel's vDSO image at
// ehdr of stopped task pid: injected calls run there, with a single step,
// so no byte of the program's memory changes.
func syscallInsn(pid int, ehdr uint64) (uint64, error) {
	b := make([]byte, 8192)
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	n, err := unix.ProcessVMReadv(pid, local, []unix.RemoteIovec{{Base: uintptr(ehdr), Len: len(b)}}, 0)
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < n; i++ {
		if b[i] == 0x0f && b[i+1] == 0x05 {
			return ehdr + uint64(i), nil
		}
	}
	return 0, errors.New("no syscall instruction in the kernel's vDSO")
}

// inject makes stopped task pid run system call nr with args from the
// instruction at insn, and returns its result; saved are the task's
// registers, which the caller restores.
func inject(pid int, saved *unix.PtraceRegs, insn uint64, in *injected, nr uint64, args ...uint64) (int64, error) {
	call := *saved
	call.Rip = insn
	call.Rax = nr
	call.Orig_rax = ^uint64(0) // no system call to restart
	a := [6]uint64{}
	copy(a[:], args)
	call.Rdi, call.Rsi, call.Rdx, call.R10, call.R8, call.R9 = a[0], a[1], a[2], a[3], a[4], a[5]
	var regs unix.PtraceRegs
	for range 64 {
		// Set before every step: the first step from an exec's stop
		// only finishes the execve, which stores its result in rax,
		// and stops again before the instruction.
		if err := unix.PtraceSetRegs(pid, &call); err != nil {
			return 0, err
		}
		if err := unix.PtraceSingleStep(pid); err != nil {
			return 0, err
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
			if err == unix.EINTR {
				continue
			}
			return 0, err
		}
		if ws.Exited() || ws.Signaled() || (ws.Stopped() && ws.TrapCause() > 0) {
			in.gone = &ws
			return 0, errGone
		}
		if !ws.Stopped() {
			continue
		}
		if err := unix.PtraceGetRegs(pid, &regs); err != nil {
			return 0, err
		}
		if sig := ws.StopSignal(); sig == unix.SIGTRAP && regs.Rip == insn+2 {
			return int64(regs.Rax), nil
		} else if sig != unix.SIGTRAP && in.sig == 0 {
			// Delivered before the call ran: keep it for later and
			// step again.
			in.sig = int(sig)
		}
		if regs.Rip != insn {
			return 0, errors.New("the injected call did not run where it was placed")
		}
	}
	return 0, errors.New("the injected call did not complete")
}

// mapVDSO maps dal's vDSO into pid's new image, stopped at its exec before
// its first instruction: anonymous private memory (so a fork copies it and
// threads share it) holding the data pages then the image, the image made
// read-only and executable. kernelEhdr is the kernel's vDSO, whose syscall
// instruction runs the injected calls. It returns the data pages' address
// and the calls that ran.
func mapVDSO(pid int, kernelEhdr uint64, header []byte, in *injected) (uint64, []int, error) {
	var saved unix.PtraceRegs
	if err := unix.PtraceGetRegs(pid, &saved); err != nil {
		return 0, nil, err
	}
	if saved.Cs != 0x33 {
		return 0, nil, errors.New("not a 64-bit program")
	}
	insn, err := syscallInsn(pid, kernelEhdr)
	if err != nil {
		return 0, nil, err
	}
	var calls []int
	text := uint64(len(vdsoImage)+4095) &^ 4095
	size := vdso.DataSize + text
	addr, err := inject(pid, &saved, insn, in, unix.SYS_MMAP, 0, size,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
	if err == nil {
		calls = append(calls, unix.SYS_MMAP)
	}
	if err == nil && addr < 0 && addr > -4096 {
		err = unix.Errno(-addr)
	}
	if err == nil {
		err = writeMem(pid, uint64(addr), header)
	}
	if err == nil {
		err = writeMem(pid, uint64(addr)+vdso.DataSize, vdsoImage)
	}
	if err == nil {
		var r int64
		r, err = inject(pid, &saved, insn, in, unix.SYS_MPROTECT, uint64(addr)+vdso.DataSize, text, unix.PROT_READ|unix.PROT_EXEC)
		if err == nil {
			calls = append(calls, unix.SYS_MPROTECT)
		}
		if err == nil && r != 0 {
			err = unix.Errno(-r)
		}
	}
	if in.gone != nil {
		return 0, calls, errGone
	}
	if rerr := unix.PtraceSetRegs(pid, &saved); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return 0, calls, err
	}
	return uint64(addr), calls, nil
}
