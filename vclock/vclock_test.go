package vclock

import (
	"strings"
	"testing"
	"time"
)

func TestStrictReadsAdvanceByQuantum(t *testing.T) {
	c := New(DefaultConfig())
	first := c.Now()
	if want := DefaultEpoch.Add(time.Microsecond); !first.Equal(want) {
		t.Fatalf("first read %v, want %v", first, want)
	}
	if m := c.MonotonicNS(); m != DefaultMono+2000 {
		t.Fatalf("second read (monotonic) %d, want %d", m, DefaultMono+2000)
	}
	c.Sleep(5 * time.Second)
	if got := c.Now().Sub(first); got != 5*time.Second+2*time.Microsecond {
		t.Fatalf("after a 5 s sleep the clock moved %v", got)
	}
	if c.Reads() != 3 || c.SleptNS() != int64(5*time.Second) {
		t.Fatalf("reads %d slept %d", c.Reads(), c.SleptNS())
	}
}

func TestAdvanceToNeverGoesBack(t *testing.T) {
	c := New(DefaultConfig())
	c.AdvanceTo(100)
	if c.AdvanceTo(50) != 100 || c.Offset() != 100 {
		t.Fatalf("offset %d after advancing to 100 then 50", c.Offset())
	}
}

func TestStreamNames(t *testing.T) {
	if Child(Child(Root, 1), 2) != "0.1.2" {
		t.Fatal(Child(Child(Root, 1), 2))
	}
	for _, ok := range []string{"0", "0.1", "0.12.3"} {
		if err := ValidStream(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1", "0.", "0.0", "0.01", "0.x", "0..1"} {
		if ValidStream(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPlayerServesInOrderThenDrifts(t *testing.T) {
	var l Log
	if err := l.Append([]byte{0, 1, 0}, []int64{10, 20, 30}); err != nil {
		t.Fatal(err)
	}
	p := NewPlayer(&l, 1000)
	for i, want := range []int64{10, 20, 30} {
		v, d := p.Read(l.Kinds[i])
		if v != want || d != nil {
			t.Fatalf("read %d = %d, %v", i, v, d)
		}
	}
	v, d := p.Read(0)
	if d == nil || v != 1030 || !strings.Contains(d.Reason, "past the 3 recorded ticks") {
		t.Fatalf("read past end = %d, %v", v, d)
	}
	if _, d := p.Read(0); d != nil {
		t.Fatal("drift reported twice")
	}
}

func TestPlayerKindMismatch(t *testing.T) {
	var l Log
	l.Append([]byte{0}, []int64{10})
	_, d := NewPlayer(&l, 1).Read(1)
	if d == nil || !strings.Contains(d.Reason, "monotonic, the recording has realtime") {
		t.Fatalf("%v", d)
	}
}

func TestLogRejectsBadBatches(t *testing.T) {
	var l Log
	if l.Append([]byte{0}, []int64{1, 2}) == nil || l.Append([]byte{7}, []int64{1}) == nil {
		t.Fatal("bad batch accepted")
	}
	l.Append([]byte{0, 0, 0}, []int64{1, 2, 3})
	k, v, end := l.Page(1, 1)
	if len(k) != 1 || v[0] != 2 || end {
		t.Fatal("page", k, v, end)
	}
	if _, v, end := l.Page(2, 10); len(v) != 1 || !end {
		t.Fatal("last page", v, end)
	}
}

func BenchmarkRealtimeNS(b *testing.B) {
	c := New(DefaultConfig())
	for b.Loop() {
		c.RealtimeNS()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		time.Now()
	}
}

func TestCompare(t *testing.T) {
	rec := &File{Streams: []StreamLog{
		{Stream: "0", Reported: true, Reads: 5, Timers: [][2]int64{{100, 1}, {100, 2}}},
		{Stream: "0.1", Reported: true, Reads: 1},
	}}
	same := &File{Streams: []StreamLog{
		{Stream: "0", Reported: true, Reads: 5, Timers: [][2]int64{{100, 1}, {100, 2}}},
		{Stream: "0.1", Reported: true, Reads: 1},
	}}
	if d := Compare(rec, same); len(d) != 0 {
		t.Fatalf("identical logs differ: %+v", d)
	}
	other := &File{Streams: []StreamLog{
		{Stream: "0", Reported: true, Reads: 5, Timers: [][2]int64{{100, 2}, {100, 1}}},
		{Stream: "0.2", Reported: true, Reads: 1},
	}}
	d := Compare(rec, other)
	if len(d) != 3 || d[0].What != "timers" || !strings.Contains(d[0].Detail, "timer firing 1 was (deadline 100 ns, registration 2)") ||
		d[1].Stream != "0.1" || d[2].Stream != "0.2" {
		t.Fatalf("%+v", d)
	}
	fewer := &File{Streams: []StreamLog{{Stream: "0", Reported: true, Reads: 4, Timers: rec.Streams[0].Timers}, {Stream: "0.1", Reported: true, Reads: 1}}}
	if d := Compare(rec, fewer); len(d) != 1 || d[0].Detail != "4 clock reads, the recording has 5" {
		t.Fatalf("%+v", d)
	}
}
