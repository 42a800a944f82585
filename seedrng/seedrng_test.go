package seedrng

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
)

// vector is one cross-language test vector: bytes [Offset, Offset+Length)
// of stream (Seed, Label), and the first Float64 values of the stream.
type vector struct {
	Seed   uint64    `json:"seed"`
	Label  string    `json:"label"`
	Offset int       `json:"offset"`
	Length int       `json:"length"`
	Hex    string    `json:"hex"`
	Floats []float64 `json:"floats"`
}

const vectorFile = "../testdata/seedrng.json"

func makeVectors() []vector {
	cases := []struct {
		seed           uint64
		label          string
		offset, length int
	}{
		{0, "0/python.random", 0, 32},
		{7, "0/os.urandom", 0, 64},
		{8, "0/os.urandom", 0, 64},
		{42, "0.1/node.crypto", 4090, 12}, // crosses the first block boundary
		{18446744073709551615, "0.1.2/node.Math.random", 8192, 16},
		{1, "", 0, 16},
		{123, "0/π-unicode/label", 100, 20},
	}
	var vs []vector
	for _, c := range cases {
		s := Derive(c.seed, c.label)
		s.Bytes(c.offset)
		v := vector{Seed: c.seed, Label: c.label, Offset: c.offset, Length: c.length, Hex: hex.EncodeToString(s.Bytes(c.length))}
		f := Derive(c.seed, c.label)
		for range 4 {
			v.Floats = append(v.Floats, f.Float64())
		}
		vs = append(vs, v)
	}
	return vs
}

func TestVectors(t *testing.T) {
	got := makeVectors()
	if golden.Update() { // go test -update rewrites testdata/seedrng.json from this implementation
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(vectorFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var want []vector
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%d vectors on file, %d computed", len(want), len(got))
	}
	for i := range want {
		if want[i].Hex != got[i].Hex {
			t.Errorf("vector %d (%d, %q): bytes %s, want %s", i, want[i].Seed, want[i].Label, got[i].Hex, want[i].Hex)
		}
		for j := range want[i].Floats {
			if want[i].Floats[j] != got[i].Floats[j] {
				t.Errorf("vector %d float %d: %v, want %v", i, j, got[i].Floats[j], want[i].Floats[j])
			}
		}
	}
}

func TestKnownAnswer(t *testing.T) {
	// Pins the specification itself, independently of the vector file: the
	// first bytes of stream (0, "") are SHAKE256("dal.seedrng.v1\0" || 0^16).
	got := hex.EncodeToString(Derive(0, "").Bytes(8))
	want := hex.EncodeToString(Block(0, "", 0)[:8])
	if got != want {
		t.Fatalf("stream start %s, block 0 %s", got, want)
	}
}

func TestStreamsDiffer(t *testing.T) {
	a := Derive(7, "0/x").Bytes(32)
	b := Derive(8, "0/x").Bytes(32)
	c := Derive(7, "0.1/x").Bytes(32)
	if string(a) == string(b) || string(a) == string(c) {
		t.Fatal("different seeds or labels produced the same bytes")
	}
}

func TestReadSplitsAreConsistent(t *testing.T) {
	whole := Derive(5, "l").Bytes(10000)
	s := Derive(5, "l")
	var parts []byte
	for _, n := range []int{1, 4095, 3, 4097, 1804} {
		parts = append(parts, s.Bytes(n)...)
	}
	if string(parts) != string(whole) {
		t.Fatal("reading in pieces differs from reading at once")
	}
}

func TestParseSeed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{{"0", 0, true}, {"42", 42, true}, {"0x2a", 42, true}, {"18446744073709551615", 1<<64 - 1, true},
		{"-1", 0, false}, {"abc", 0, false}, {"18446744073709551616", 0, false}, {"", 0, false}} {
		got, err := ParseSeed(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSeed(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func BenchmarkDerive4K(b *testing.B) {
	s := Derive(1, "0/bench")
	p := make([]byte, 4096)
	b.SetBytes(4096)
	for b.Loop() {
		s.Read(p)
	}
}

func BenchmarkFloat64(b *testing.B) {
	s := Derive(1, "0/bench")
	for b.Loop() {
		s.Float64()
	}
}
