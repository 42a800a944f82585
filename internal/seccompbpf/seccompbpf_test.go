package seccompbpf

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestAssemble: jumps resolve to their labels' offsets; a jump to a label
// behind it, to none, or past 255 instructions panics.
func TestAssemble(t *testing.T) {
	b := New()
	b.Load(OffNr)
	b.Jump(JeqK, 7, "yes", "")
	b.Ret(unix.SECCOMP_RET_ALLOW)
	b.Label("yes")
	b.Ret(unix.SECCOMP_RET_KILL_PROCESS)
	p := b.Assemble()
	if len(p) != 4 || p[1].Jt != 1 || p[1].Jf != 0 || p[0].Code != LdAbsW || p[3].K != unix.SECCOMP_RET_KILL_PROCESS {
		t.Fatalf("assembled %+v", p)
	}
	for name, build := range map[string]func(*Program){
		"backwards": func(b *Program) { b.Label("l"); b.Jump(JeqK, 0, "l", "") },
		"no label":  func(b *Program) { b.Jump(JeqK, 0, "nowhere", "") },
		"too far": func(b *Program) {
			b.Jump(JeqK, 0, "far", "")
			for range 256 {
				b.Ret(0)
			}
			b.Label("far")
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			b := New()
			build(b)
			b.Assemble()
		}()
	}
}
