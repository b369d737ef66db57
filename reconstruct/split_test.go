package reconstruct

import (
	"reflect"
	"testing"
)

// TestStatsAddCoversEveryField fails when a counter is added to Stats but
// not to Add: a sharded pipeline would report it as zero.
func TestStatsAddCoversEveryField(t *testing.T) {
	var one Stats
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		default:
			t.Fatalf("Stats.%s: kind %v not handled by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	var sum Stats
	sum.Add(one)
	sum.Add(one)
	s := reflect.ValueOf(sum)
	for i := range s.NumField() {
		f := s.Field(i)
		got := f.Interface()
		var want any
		switch f.Kind() {
		case reflect.Uint64:
			want = uint64(2 * (i + 1))
		case reflect.Int:
			want = 2 * (i + 1)
		case reflect.Int64:
			want = int64(2 * (i + 1))
		}
		if got != want {
			t.Errorf("Stats.%s: Add gave %v, want %v", s.Type().Field(i).Name, got, want)
		}
	}
}

func TestConfigSplitSharesBounds(t *testing.T) {
	c := Config{MaxConnections: 1000, MaxMemory: 1 << 30}
	got := c.Split(4)
	if got.MaxConnections != 250 || got.MaxMemory != 1<<28 {
		t.Errorf("Split(4): connections %d, memory %d; want 250 and %d", got.MaxConnections, got.MaxMemory, 1<<28)
	}
	if got.MaxHeaderBudget != DefaultMaxHeaderBudget/4 || got.MaxBodyBudget != DefaultMaxBodyBudget/4 {
		t.Errorf("Split(4): header budget %d, body budget %d; want a quarter of the defaults", got.MaxHeaderBudget, got.MaxBodyBudget)
	}
	if got.MaxHeaderBytes != DefaultMaxHeaderBytes {
		t.Errorf("Split(4) changed the per-message bound to %d", got.MaxHeaderBytes)
	}
	if !reflect.DeepEqual(c.Split(1), c) {
		t.Error("Split(1) changed the configuration")
	}
	if neg := (Config{MaxBodyBudget: -1}).Split(2); neg.MaxBodyBudget != -1 {
		t.Errorf("Split kept body capture off? MaxBodyBudget %d", neg.MaxBodyBudget)
	}
}
