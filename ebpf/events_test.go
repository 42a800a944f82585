package ebpf

import (
	"encoding/binary"
	"testing"
)

func record(session, pid uint32, kind byte, family, port uint16, addr []byte, path string) []byte {
	raw := make([]byte, eventSize)
	binary.LittleEndian.PutUint32(raw[offSession:], session)
	binary.LittleEndian.PutUint32(raw[offPID:], pid)
	raw[offKind] = kind
	binary.LittleEndian.PutUint16(raw[offFamily:], family)
	binary.BigEndian.PutUint16(raw[offPort:], port)
	copy(raw[offAddr:], addr)
	copy(raw[offPath:], path)
	return raw
}

func TestDecodeEvent(t *testing.T) {
	v6 := []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	tests := []struct {
		name string
		raw  []byte
		want Event
	}{
		{"inet", record(7, 42, kindConnect, familyInet, 443, []byte{93, 184, 216, 34}, ""), Event{"connect", 42, "93.184.216.34:443"}},
		{"inet6", record(7, 42, kindSendto, familyInet6, 53, v6, ""), Event{"sendto", 42, "[2001:db8::1]:53"}},
		{"unix", record(7, 42, kindConnect, familyUnix, 0, nil, "/run/nscd/socket"), Event{"connect", 42, "unix:/run/nscd/socket"}},
		{"abstract", record(7, 42, kindConnect, familyUnix, 0, nil, "\x00dbus-1"), Event{"connect", 42, "unix:@dbus-1"}},
		{"unreadable", record(7, 42, kindConnect, 0, 0, nil, ""), Event{"connect", 42, "unreadable address"}},
		{"random", record(7, 9, kindRandomDev, 0, 0, nil, "/dev/urandom"), Event{"random_device", 9, "/dev/urandom"}},
		{"exec", record(7, 9, kindExec, 0, 0, nil, "/usr/bin/python3"), Event{"exec", 9, "/usr/bin/python3"}},
		{"write", record(7, 9, kindWriteOut, 0, 0, nil, "/etc/passwd"), Event{"write_outside", 9, "/etc/passwd"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session, got, err := decodeEvent(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if session != 7 || got != tc.want {
				t.Errorf("got session %d %+v, want 7 %+v", session, got, tc.want)
			}
		})
	}
	for name, raw := range map[string][]byte{
		"short":        make([]byte, eventSize-1),
		"unknown kind": record(1, 1, 99, 0, 0, nil, ""),
	} {
		if _, _, err := decodeEvent(raw); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestPlumbing(t *testing.T) {
	for path, want := range map[string]bool{
		"/dev/null": true, "/dev/pts/3": true, "/proc/self/fd/1": true,
		"/etc/passwd": false, "/dev/nullx": false, "/tmp/x": false,
	} {
		if plumbing(path) != want {
			t.Errorf("plumbing(%q) = %v", path, !want)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(record(1, 2, kindConnect, familyInet6, 80, []byte{1, 2, 3}, "x"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _, _ = decodeEvent(raw) // must not panic
	})
}
