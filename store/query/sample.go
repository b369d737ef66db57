package query

// SampleMax bounds SampleQuery.Max: the records a sample holds per class.
const SampleMax = 100_000

// SampleMaxClasses bounds the classes one sample answer holds (classes
// come from the classes file, so a real one stays far below).
const SampleMaxClasses = 256

// SampleQuery asks for a bounded, reproducible sample of component values
// per class: of each class's records in Range, the Max whose ids have the
// smallest keyed hash (SampleKey with Seed). The choice depends on the ids
// and the seed alone, not on the engine's row order, so the same records
// give the same sample on every run and engine; and a hash is as good as
// a random draw, so the sample is a uniform one. Values are bound as
// parameters.
type SampleQuery struct {
	Kind   Kind
	Range  TimeRange
	Class  string // "" = every class, one sample each
	Sensor string // "" = every sensor
	// Components to read (default Components(Kind) but rtt); all read
	// from the same records, so Values[c][i] belong together.
	Components []string
	Max        int // per class; default 5000, at most SampleMax
	Seed       uint64
}

// ClassSample is one class's sample. Count is the number of the class's
// records in range (at least len of each Values list).
type ClassSample struct {
	Class  string
	Count  int64
	Values map[string][]int64 // component -> values, ns, in the same record order
}

// SampleKey is the keyed 64-bit hash the sample ranks ids by: FNV-1a of
// the seed and the id, then a 64-bit finaliser so that ids differing only
// in their last characters still spread over the whole range.
func SampleKey(seed uint64, id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < 8; i++ {
		h ^= (seed >> (8 * i)) & 0xff
		h *= 1099511628211
	}
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
