package wire

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	req := Request{Op: OpTicksPut, ID: 3, Kinds: []byte{0, 1}, Values: []int64{-5, 1 << 60}, Seed: 1<<64 - 1}
	body, err := Encode(&req)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFrame(&buf, body, DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(&buf, DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeRequest(got)
	if err != nil || back.Op != req.Op || back.Values[1] != 1<<60 || back.Seed != req.Seed || back.Kinds[1] != 1 {
		t.Fatalf("round trip %+v %v", back, err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 5, 1}), 100); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("half frame: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(nil), 100); !errors.Is(err, io.EOF) {
		t.Fatalf("clean close: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 1, 0}), 100); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("oversized: %v", err)
	}
	if err := WriteFrame(io.Discard, make([]byte, 101), 100); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("oversized write: %v", err)
	}
}

func TestDecodeAcceptsEveryIntWidth(t *testing.T) {
	// {"op": "x", "id": uint64 7, "pid": int8 -1... } hand-encoded.
	body := []byte{0x83,
		0xa2, 'o', 'p', 0xa1, 'x',
		0xa2, 'i', 'd', 0xcf, 0, 0, 0, 0, 0, 0, 0, 7,
		0xa3, 'p', 'i', 'd', 0xd1, 0x01, 0x00}
	req, err := DecodeRequest(body)
	if err != nil || req.ID != 7 || req.PID != 256 {
		t.Fatalf("%+v %v", req, err)
	}
}

// FuzzDecode feeds arbitrary bytes to the frame reader and the request
// decoder: they must return an error or a request, never panic or allocate
// beyond the frame limit.
func FuzzDecode(f *testing.F) {
	ok, _ := Encode(&Request{Op: OpHello, Proto: 1, Role: RoleShim, Session: "s", Stream: "0"})
	f.Add(AppendFrame(nil, ok))
	f.Add([]byte{0, 0, 0, 1, 0x80})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			body, err := ReadFrame(r, 1<<16)
			if err != nil {
				return
			}
			DecodeRequest(body)
		}
	})
}

func BenchmarkFrameCodec(b *testing.B) {
	req := Request{Op: OpTicksPut, Session: "0123456789abcdef", Stream: "0.1", Kinds: make([]byte, 64), Values: make([]int64, 64)}
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		body, _ := Encode(&req)
		WriteFrame(&buf, body, DefaultMaxFrame)
		got, _ := ReadFrame(&buf, DefaultMaxFrame)
		DecodeRequest(got)
	}
}

func TestDeclaredLengthsCannotExhaustMemory(t *testing.T) {
	for name, body := range map[string][]byte{
		"array32": {0x82, 0xa2, 'o', 'p', 0xa1, 'x', 0xa6, 'v', 'a', 'l', 'u', 'e', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 1, 2, 3},
		"bin32":   {0x82, 0xa2, 'o', 'p', 0xa1, 'x', 0xa5, 'k', 'i', 'n', 'd', 's', 0xc6, 0xff, 0xff, 0xff, 0xff, 1, 2, 3},
		"map32":   {0xdf, 0x7f, 0xff, 0xff, 0xff, 0xa2, 'o', 'p'},
		"deep":    append(bytes.Repeat([]byte{0x81, 0xa1, 'a'}, 40), 0xc0),
		"trailer": {0x81, 0xa2, 'o', 'p', 0xa1, 'x', 0xc0},
	} {
		if _, err := DecodeRequest(body); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkDecodeTicksPut is the server's cost for one batched upload of
// 4096 realtime ticks (the shims' batch size).
func BenchmarkDecodeTicksPut(b *testing.B) {
	req := Request{Op: OpTicksPut, Session: "0123456789abcdef", Stream: "0", Kinds: make([]byte, 4096), Values: make([]int64, 4096)}
	for i := range req.Values {
		req.Values[i] = 1795342065885690700 + int64(i)*1000
	}
	body, _ := Encode(&req)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAnnouncedFrameCostsOnlyWhatArrives: a peer that announces a 4 MiB
// frame and hangs up after a few bytes makes the reader allocate about
// 64 KiB, not 4 MiB; a frame that does arrive is read whole.
func TestAnnouncedFrameCostsOnlyWhatArrives(t *testing.T) {
	announce := AppendFrame(nil, make([]byte, 4<<20))[:4+100]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := ReadFrame(bytes.NewReader(announce), DefaultMaxFrame); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated frame: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > 128<<10 {
		t.Fatalf("an announced 4 MiB frame allocated %d KiB", per>>10)
	}
	for _, n := range []int{1, eagerFrame - 1, eagerFrame, eagerFrame + 1, 3*eagerFrame + 7, DefaultMaxFrame} {
		body := bytes.Repeat([]byte{7}, n)
		body[n-1] = 9
		got, err := ReadFrame(bytes.NewReader(AppendFrame(nil, body)), DefaultMaxFrame)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("frame of %d bytes: %d bytes back, %v", n, len(got), err)
		}
	}
}
