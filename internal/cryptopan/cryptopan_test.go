package cryptopan

import (
	"net/netip"
	"testing"
)

// refKey is the sample key of the Crypto-PAn reference distribution.
var refKey = []byte{21, 34, 23, 141, 51, 164, 207, 128, 19, 10, 91, 22, 73, 144, 125, 16,
	216, 152, 143, 131, 121, 121, 101, 39, 98, 87, 76, 45, 42, 132, 34, 2}

func mustNew(t testing.TB, key []byte) *Anonymizer {
	t.Helper()
	a, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The reference distribution's sample trace, raw and anonymized
// (sample_trace_raw / sample_trace_sanitized), as other implementations
// test against it.
func TestReferenceVectorsIPv4(t *testing.T) {
	a := mustNew(t, refKey)
	for in, want := range map[string]string{
		"128.11.68.132": "135.242.180.132", "129.118.74.4": "134.136.186.123", "130.132.252.244": "133.68.164.234",
		"141.223.7.43": "141.167.8.160", "141.233.145.108": "141.129.237.235", "152.163.225.39": "151.140.114.167",
		"156.29.3.236": "147.225.12.42", "165.247.96.84": "162.9.99.234", "166.107.77.190": "160.132.178.185",
		"192.102.249.13": "252.138.62.131", "192.215.32.125": "252.43.47.189", "192.233.80.103": "252.25.108.8",
		"192.41.57.43": "252.222.221.184", "193.150.244.223": "253.169.52.216", "195.205.63.100": "255.186.223.5",
		"198.200.171.101": "249.199.68.213", "198.26.132.101": "249.36.123.202", "198.36.213.5": "249.7.21.132",
		"198.51.77.238": "249.18.186.254", "199.217.79.101": "248.38.184.213", "202.49.198.20": "245.206.7.234",
		"203.12.160.252": "244.248.163.4", "204.184.162.189": "243.192.77.90", "204.202.136.230": "243.178.4.198",
		"204.29.20.4": "243.33.20.123", "205.178.38.67": "242.108.198.51", "205.188.147.153": "242.96.16.101",
		"205.188.248.25": "242.96.88.27", "205.245.121.43": "242.21.121.163", "207.105.49.5": "241.118.205.138",
		"207.135.65.238": "241.202.129.222", "207.155.9.214": "241.220.250.22", "207.188.7.45": "241.255.249.220",
		"207.25.71.27": "241.33.119.156", "207.33.151.131": "241.1.233.131", "208.147.89.59": "227.237.98.191",
		"208.234.120.210": "227.154.67.17", "208.28.185.184": "227.39.94.90", "208.52.56.122": "227.8.63.165",
		"209.12.231.7": "226.243.167.8", "209.238.72.3": "226.6.119.243", "209.246.74.109": "226.22.124.76",
		"209.68.60.238": "226.184.220.233", "209.85.249.6": "226.170.70.6", "212.120.124.31": "228.135.163.231",
		"212.146.8.236": "228.19.4.234", "212.186.227.154": "228.59.98.98", "212.204.172.118": "228.71.195.169",
		"212.206.130.201": "228.69.242.193", "216.148.237.145": "235.84.194.111", "216.157.30.252": "235.89.31.26",
		"216.184.159.48": "235.96.225.78", "216.227.10.221": "235.28.253.36", "216.254.18.172": "235.7.16.162",
		"216.32.132.250": "235.192.139.38", "216.35.217.178": "235.195.157.81", "24.0.250.221": "100.15.198.226",
		"24.13.62.231": "100.2.192.247", "24.14.213.138": "100.1.42.141", "24.5.0.80": "100.9.15.210",
		"24.7.198.88": "100.10.6.25", "24.94.26.44": "100.88.228.35", "38.15.67.68": "64.3.66.187",
		"4.3.88.225": "124.60.155.63", "63.14.55.111": "95.9.215.7", "63.195.241.44": "95.179.238.44",
		"63.97.7.140": "95.97.9.123", "64.14.118.196": "0.255.183.58", "64.34.154.117": "0.221.154.117",
		"64.39.15.238": "0.219.7.41", "10.185.25.118": "117.161.29.118",
	} {
		if got := a.Addr(netip.MustParseAddr(in)); got != netip.MustParseAddr(want) {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
}

// IPv6 under the same key, as the widely used Go implementation
// (Yawning Angel's) maps it: the same construction over 128 bits.
func TestVectorsIPv6(t *testing.T) {
	a := mustNew(t, refKey)
	for in, want := range map[string]string{
		"::1":         "78ff:f001:9fc0:20df:8380:b1f1:704:ed",
		"::2":         "78ff:f001:9fc0:20df:8380:b1f1:704:ef",
		"::ffff":      "78ff:f001:9fc0:20df:8380:b1f1:704:f838",
		"2001:db8::1": "4401:2bc:603f:d91d:27f:ff8e:e6f1:dc1e",
		"2001:db8::2": "4401:2bc:603f:d91d:27f:ff8e:e6f1:dc1c",
	} {
		if got := a.Addr(netip.MustParseAddr(in)); got != netip.MustParseAddr(want) {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
}

func TestMappedZonedAndInvalid(t *testing.T) {
	a := mustNew(t, refKey)
	if got := a.Addr(netip.MustParseAddr("::ffff:128.11.68.132")); got != netip.MustParseAddr("::ffff:135.242.180.132") {
		t.Errorf("mapped IPv4 -> %s, want ::ffff:135.242.180.132", got)
	}
	if got := a.Addr(netip.MustParseAddr("fe80::1%eth0")); got.Zone() != "eth0" || got.WithZone("") == netip.MustParseAddr("fe80::1") {
		t.Errorf("zoned -> %s: want another address in zone eth0", got)
	}
	if got := a.Addr(netip.Addr{}); got.IsValid() {
		t.Errorf("invalid -> %s", got)
	}
}

func TestBadKey(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33} {
		if _, err := New(make([]byte, n)); err == nil {
			t.Errorf("a key of %d bytes was taken", n)
		}
	}
}

// commonPrefix is the number of leading bits two equal-length addresses share.
func commonPrefix(x, y []byte) int {
	for i := range x {
		if d := x[i] ^ y[i]; d != 0 {
			n := 0
			for d&0x80 == 0 {
				d <<= 1
				n++
			}
			return i*8 + n
		}
	}
	return len(x) * 8
}

// FuzzPrefixPreserving checks the defining property on any pair of
// addresses: the images share exactly as many leading bits as the
// originals, so the map is also one to one. (IPv4-mapped addresses map
// as IPv4, so the property holds among them and among the others.)
func FuzzPrefixPreserving(f *testing.F) {
	f.Add([]byte{10, 4, 1, 2}, []byte{10, 4, 9, 9}, []byte{0})
	f.Add(make([]byte, 16), []byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, []byte{7})
	f.Fuzz(func(t *testing.T, x, y, seed []byte) {
		n := 4
		if len(x) >= 16 && len(y) >= 16 {
			n = 16
		}
		if len(x) < n || len(y) < n {
			return
		}
		key := make([]byte, KeySize)
		copy(key, seed)
		a := mustNew(t, key)
		ax, _ := netip.AddrFromSlice(x[:n])
		ay, _ := netip.AddrFromSlice(y[:n])
		if ax.Is4In6() != ay.Is4In6() {
			return // a mapped address maps as IPv4, by design
		}
		bx, by := a.Addr(ax).AsSlice(), a.Addr(ay).AsSlice()
		if got, want := commonPrefix(bx, by), commonPrefix(x[:n], y[:n]); got != want {
			t.Fatalf("%s and %s share %d bits, their images %s and %s %d", ax, ay, want, a.Addr(ax), a.Addr(ay), got)
		}
	})
}

func BenchmarkAddrIPv4(b *testing.B) {
	a := mustNew(b, refKey)
	ip := netip.MustParseAddr("192.0.2.1")
	for b.Loop() {
		a.Addr(ip)
	}
}

func BenchmarkAddrIPv6(b *testing.B) {
	a := mustNew(b, refKey)
	ip := netip.MustParseAddr("2001:db8::1")
	for b.Loop() {
		a.Addr(ip)
	}
}
