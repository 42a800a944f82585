//go:build amd64

package sandbox

// The 32-bit calls are written in x86 machine code: amd64 only.

import "testing"

// TestCompatABIRefusals: the 32-bit ABI (int 0x80) gets no io_uring and
// no TIOCSTI either. The calls are made from machine code Python maps:
// refused, they fail with EPERM before their arguments are looked at.
func TestCompatABIRefusals(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	// push rbx; mov eax, NR; mov ebx, A; mov ecx, B; xor edx, edx; int 0x80; pop rbx; ret
	script := `python3 -c '
import ctypes, mmap, struct, sys
def call32(nr, a, b):
    code = b"\x53\xb8" + struct.pack("<I", nr) + b"\xbb" + struct.pack("<I", a) + b"\xb9" + struct.pack("<I", b) + b"\x31\xd2\xcd\x80\x5b\xc3"
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    return ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
print("io_uring_setup", call32(425, 1, 0))
print("io_uring_enter", call32(426, 0, 0))
print("ioctl TIOCSTI", call32(54, 1, 0x5412))
print("getpid", call32(20, 0, 0) > 0)
'`
	r := run(t, cfg, script)
	// -1 is EPERM; unrefused, these fail otherwise here: EFAULT (-14),
	// EINVAL (-22) and ENOTTY (-25).
	want := "io_uring_setup -1\nio_uring_enter -1\nioctl TIOCSTI -1\ngetpid True\n"
	if r.stdout != want {
		t.Errorf("32-bit calls in the sandbox: %q (stderr %q), want %q", r.stdout, r.stderr, want)
	}
}
