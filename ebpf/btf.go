package ebpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// kernelLayout is where the fields the programs read sit in the running
// kernel's structs. The loader sets them as read-only constants in the
// object, so one object runs on any kernel whose BTF names these fields.
//
// Resolving three offsets this way costs about 1 ms; handing the object's
// CO-RE relocations to cilium/ebpf would decode and index the whole kernel
// BTF (about 20 ms here), on every Open.
type kernelLayout struct {
	TaskTgid     uint32    // struct task_struct, tgid
	BprmFilename uint32    // struct linux_binprm, filename
	RegsArgs     [6]uint32 // struct pt_regs: syscall arguments 0..5
}

// syscallArgRegs names, per GOARCH, the pt_regs members holding syscall
// arguments 0..5; arm64 keeps them in regs[0..5].
var syscallArgRegs = map[string][6]string{
	"amd64": {"di", "si", "dx", "r10", "r8", "r9"},
	"arm64": {"regs", "regs", "regs", "regs", "regs", "regs"},
}

// layoutFromBTF reads the layout from raw BTF (/sys/kernel/btf/vmlinux).
func layoutFromBTF(raw []byte, goarch string) (kernelLayout, error) {
	var l kernelLayout
	regs, ok := syscallArgRegs[goarch]
	if !ok {
		return l, fmt.Errorf("kernel BTF: no register table for %s", goarch)
	}
	b, err := parseBTF(raw)
	if err != nil {
		return l, err
	}
	structs := b.structsNamed("task_struct", "linux_binprm", "pt_regs")
	if l.TaskTgid, err = b.memberOffset(structs, "task_struct", "tgid"); err != nil {
		return l, err
	}
	if l.BprmFilename, err = b.memberOffset(structs, "linux_binprm", "filename"); err != nil {
		return l, err
	}
	for i, reg := range regs {
		off, err := b.memberOffset(structs, "pt_regs", reg)
		if err != nil {
			return l, err
		}
		if reg == "regs" {
			off += uint32(8 * i)
		}
		l.RegsArgs[i] = off
	}
	return l, nil
}

// BTF kinds (include/uapi/linux/btf.h).
const (
	btfInt      = 1
	btfArray    = 3
	btfStruct   = 4
	btfUnion    = 5
	btfEnum     = 6
	btfTypedef  = 8
	btfVolatile = 9
	btfConst    = 10
	btfRestrict = 11
	btfFuncProt = 13
	btfVar      = 14
	btfDatasec  = 15
	btfDeclTag  = 17
	btfTypeTag  = 18
	btfEnum64   = 19
	btfMaxKind  = 19
)

// btfTypes indexes the type section of a BTF blob by type id.
type btfTypes struct {
	types []byte
	strs  []byte
	offs  []uint32 // offs[id-1] is where type id starts in types
}

var errBTF = errors.New("kernel BTF is malformed")

func parseBTF(raw []byte) (*btfTypes, error) {
	le := binary.LittleEndian
	if len(raw) < 24 || le.Uint16(raw) != 0xeb9f {
		return nil, fmt.Errorf("%w: no little-endian BTF header", errBTF)
	}
	hdrLen := uint64(le.Uint32(raw[4:]))
	typeOff, typeLen := uint64(le.Uint32(raw[8:])), uint64(le.Uint32(raw[12:]))
	strOff, strLen := uint64(le.Uint32(raw[16:])), uint64(le.Uint32(raw[20:]))
	if hdrLen+typeOff+typeLen > uint64(len(raw)) || hdrLen+strOff+strLen > uint64(len(raw)) {
		return nil, fmt.Errorf("%w: sections run past the end", errBTF)
	}
	b := &btfTypes{
		types: raw[hdrLen+typeOff : hdrLen+typeOff+typeLen],
		strs:  raw[hdrLen+strOff : hdrLen+strOff+strLen],
	}
	b.offs = make([]uint32, 0, len(b.types)/24)
	for p := 0; p < len(b.types); {
		if p+12 > len(b.types) {
			return nil, fmt.Errorf("%w: truncated type", errBTF)
		}
		info := le.Uint32(b.types[p+4:])
		kind, vlen := (info>>24)&0x1f, int(info&0xffff)
		n := 12
		switch kind {
		case btfInt, btfVar, btfDeclTag:
			n += 4
		case btfArray:
			n += 12
		case btfStruct, btfUnion, btfDatasec, btfEnum64:
			n += 12 * vlen
		case btfEnum, btfFuncProt:
			n += 8 * vlen
		}
		if kind == 0 || kind > btfMaxKind {
			return nil, fmt.Errorf("%w: unknown kind %d", errBTF, kind)
		}
		b.offs = append(b.offs, uint32(p))
		p += n
	}
	return b, nil
}

func (b *btfTypes) name(off uint32) []byte {
	if int(off) >= len(b.strs) {
		return nil
	}
	s := b.strs[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
}

// header returns the name offset, kind, vlen, kind_flag and size/type word
// of type id.
func (b *btfTypes) header(id uint32) (nameOff, kind uint32, vlen int, kflag bool, sizeType uint32, ok bool) {
	if id == 0 || int(id) > len(b.offs) {
		return 0, 0, 0, false, 0, false
	}
	p := b.offs[id-1]
	le := binary.LittleEndian
	info := le.Uint32(b.types[p+4:])
	return le.Uint32(b.types[p:]), (info >> 24) & 0x1f, int(info & 0xffff), info&(1<<31) != 0, le.Uint32(b.types[p+8:]), true
}

// structsNamed returns the ids of the structs with the given names.
func (b *btfTypes) structsNamed(names ...string) map[string][]uint32 {
	ids := map[string][]uint32{}
	for id := uint32(1); int(id) <= len(b.offs); id++ {
		nameOff, kind, _, _, _, _ := b.header(id)
		if kind != btfStruct || nameOff == 0 {
			continue
		}
		name := b.name(nameOff)
		for _, n := range names {
			if string(name) == n {
				ids[n] = append(ids[n], id)
			}
		}
	}
	return ids
}

// memberOffset returns the byte offset of member in the struct named
// structName, looking through anonymous struct and union members (as in
// arm64's pt_regs or a randomized task_struct).
func (b *btfTypes) memberOffset(structs map[string][]uint32, structName, member string) (uint32, error) {
	for _, id := range structs[structName] {
		budget := 1 << 16 // members visited: bounds the walk on malformed BTF
		if bits, ok := b.findMember(id, member, 0, &budget); ok {
			if bits%8 != 0 {
				return 0, fmt.Errorf("kernel BTF: %s.%s is a bitfield", structName, member)
			}
			return uint32(bits / 8), nil
		}
	}
	return 0, fmt.Errorf("kernel BTF: no struct %s with a member %s", structName, member)
}

func (b *btfTypes) findMember(id uint32, member string, base uint64, budget *int) (uint64, bool) {
	_, kind, vlen, kflag, _, ok := b.header(id)
	if !ok || (kind != btfStruct && kind != btfUnion) {
		return 0, false
	}
	le := binary.LittleEndian
	first := int(b.offs[id-1]) + 12
	if first+12*vlen > len(b.types) {
		return 0, false
	}
	for i := range vlen {
		if *budget--; *budget < 0 {
			return 0, false
		}
		m := b.types[first+12*i:]
		nameOff, typ, off := le.Uint32(m), le.Uint32(m[4:]), uint64(le.Uint32(m[8:]))
		if kflag {
			off &= 0xffffff // the high byte is the bitfield size
		}
		if nameOff != 0 {
			if string(b.name(nameOff)) == member {
				return base + off, true
			}
			continue
		}
		if bits, ok := b.findMember(b.resolve(typ), member, base+off, budget); ok {
			return bits, true
		}
	}
	return 0, false
}

// resolve skips typedefs and qualifiers.
func (b *btfTypes) resolve(id uint32) uint32 {
	for range 16 {
		_, kind, _, _, next, ok := b.header(id)
		if !ok {
			return 0
		}
		switch kind {
		case btfTypedef, btfVolatile, btfConst, btfRestrict, btfTypeTag:
			id = next
		default:
			return id
		}
	}
	return 0
}
