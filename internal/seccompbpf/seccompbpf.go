// Package seccompbpf assembles the classic BPF programs seccomp runs on
// struct seccomp_data: loads of its words, conditional jumps to named
// labels, returns. It is the one assembler of dal's filters (the syscall
// layer's rules in package sysvirt, the sandbox's watcher and refusals);
// it knows nothing of which calls they take.
package seccompbpf

import "golang.org/x/sys/unix"

// Instruction codes the filters use.
const (
	LdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS // A = data[K:K+4]
	JeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	JsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	RetK   = unix.BPF_RET | unix.BPF_K
)

// Offsets in struct seccomp_data.
const (
	OffNr   = 0
	OffArch = 4
	OffArgs = 16 // args[i] at 16+8i; the low half first (little endian)
)

// Program is a program being assembled. Its jumps name labels and go
// forward only, over at most 255 instructions (an 8-bit offset):
// [Program.Assemble] panics on a longer one, so a test that builds every
// filter finds it before a sandbox starts.
type Program struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	pc     int
	jt, jf string // "" = the next instruction
}

// New starts an empty program.
func New() *Program { return &Program{labels: map[string]int{}} }

// Label names the next instruction.
func (b *Program) Label(name string) { b.labels[name] = len(b.prog) }

// Load loads the word at off of struct seccomp_data into A.
func (b *Program) Load(off uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: LdAbsW, K: off})
}

// ALU applies op (unix.BPF_AND, ...) with the constant k to A.
func (b *Program) ALU(op uint16, k uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: unix.BPF_ALU | op | unix.BPF_K, K: k})
}

// Ret returns k (a SECCOMP_RET_* action).
func (b *Program) Ret(k uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: RetK, K: k})
}

// Append appends instructions assembled elsewhere (a part of the program
// whose jumps stay within it, such as package sysvirt's Filter).
func (b *Program) Append(ins ...unix.SockFilter) {
	b.prog = append(b.prog, ins...)
}

// Jump compares A with k by code (JeqK, JsetK) and goes on at the label jt
// when true, jf when false ("" is the next instruction).
func (b *Program) Jump(code uint16, k uint32, jt, jf string) {
	b.fixups = append(b.fixups, fixup{pc: len(b.prog), jt: jt, jf: jf})
	b.prog = append(b.prog, unix.SockFilter{Code: code, K: k})
}

// Assemble resolves the jumps and returns the program. It panics on a
// jump to a label not set, backwards, or further than 255 instructions.
func (b *Program) Assemble() []unix.SockFilter {
	rel := func(pc int, l string) uint8 {
		if l == "" {
			return 0
		}
		t, ok := b.labels[l]
		if !ok || t <= pc || t-pc-1 > 255 {
			panic("seccompbpf: bad seccomp jump to " + l)
		}
		return uint8(t - pc - 1)
	}
	for _, f := range b.fixups {
		b.prog[f.pc].Jt, b.prog[f.pc].Jf = rel(f.pc, f.jt), rel(f.pc, f.jf)
	}
	return b.prog
}
