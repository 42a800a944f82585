package bench

import (
	"testing"
	"time"
)

func TestSlower(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		f      Figure
		factor float64
		slower bool
	}{
		{"time above 1", Figure{Ratio: 1.5, Cost: CostTime}, 1.5, true},
		{"time below 1", Figure{Ratio: 0.5, Cost: CostTime}, 0, false},
		{"time exactly 1", Figure{Ratio: 1, Cost: CostTime}, 0, false},
		{"rate below 1", Figure{Ratio: 0.5, Cost: CostRate}, 2, true},
		{"rate above 1", Figure{Ratio: 1.2, Cost: CostRate}, 0, false},
		{"not a cost", Figure{Ratio: 3}, 0, false},
		{"no ratio", Figure{Cost: CostTime}, 0, false},
	} {
		factor, slower := c.f.Slower()
		if factor != c.factor || slower != c.slower {
			t.Errorf("%s: Slower() = %v, %v; want %v, %v", c.name, factor, slower, c.factor, c.slower)
		}
	}
}

func TestSetRatiosAndPairs(t *testing.T) {
	t.Parallel()
	a := Sample{2 * time.Millisecond, 3 * time.Millisecond, 8 * time.Millisecond}
	b := Sample{time.Millisecond, time.Millisecond, 2 * time.Millisecond, time.Millisecond} // the extra one has no pair
	var f Figure
	f.SetRatios(Ratios(a, b))
	if f.Ratio != 3 || f.RatioMin != 2 || f.RatioMax != 4 || f.Repeats != 3 {
		t.Errorf("SetRatios(Ratios) = %v (min %v, max %v, n %d); want 3 (min 2, max 4, n 3)", f.Ratio, f.RatioMin, f.RatioMax, f.Repeats)
	}
	if v := Div(Values{1, 4, 9}, Values{1, 0, 3}); len(v) != 2 || v[0] != 1 || v[1] != 3 {
		t.Errorf("Div skips a zero divisor: got %v, want [1 3]", v)
	}
	var empty Figure
	empty.SetRatios(nil)
	if empty.Ratio != 0 || empty.Repeats != 0 {
		t.Errorf("SetRatios(nil) set %+v", empty)
	}
}

// TestMedian: bench's medians are stats.Median's (the mean of the two middle
// values for an even count), not the upper middle value.
func TestMedian(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		s    Sample
		want time.Duration
	}{
		{"one", Sample{3 * ms}, 3 * ms},
		{"odd, unsorted", Sample{9 * ms, 1 * ms, 4 * ms}, 4 * ms},
		{"even: mean of the middle two", Sample{4 * ms, 1 * ms, 3 * ms, 2 * ms}, 2500 * time.Microsecond},
		{"even, rounded to the nanosecond", Sample{1, 2}, 2},
	} {
		if got := c.s.Median(); got != c.want {
			t.Errorf("%s: Sample%v.Median() = %v, want %v", c.name, c.s, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		v    Values
		want float64
	}{
		{"one", Values{0.5}, 0.5},
		{"odd", Values{3, 1, 2}, 2},
		{"even", Values{10, 1, 2, 3}, 2.5},
	} {
		if got := c.v.Median(); got != c.want {
			t.Errorf("%s: Values%v.Median() = %v, want %v", c.name, c.v, got, c.want)
		}
	}
}
