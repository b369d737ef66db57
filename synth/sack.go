package synth

import (
	"encoding/binary"

	"github.com/rtmon/rtmon/capture"
)

// maxSACKWithTS is how many SACK blocks fit next to timestamps (40 option
// bytes), as many as Linux sends.
const maxSACKWithTS = 3

// sackOf encodes, as an event payload, the SACK blocks of a receiver that
// has the mss-sized segments has(i) of a total-byte stream starting at base,
// all before cum: the ranges above cum, the one holding the latest arrival
// first (RFC 2018), then the others from the highest down.
func sackOf(n int, has func(int) bool, cum, latest int, base uint32, total int) []byte {
	var blocks [][2]int // segment ranges [first, last+1)
	for i := cum; i < n; {
		if !has(i) {
			i++
			continue
		}
		j := i
		for j < n && has(j) {
			j++
		}
		blocks = append(blocks, [2]int{i, j})
		i = j
	}
	var out []byte
	put := func(b [2]int) {
		out = binary.BigEndian.AppendUint32(out, base+uint32(b[0]*mss))
		out = binary.BigEndian.AppendUint32(out, base+uint32(min(b[1]*mss, total)))
	}
	for _, b := range blocks {
		if b[0] <= latest && latest < b[1] {
			put(b)
		}
	}
	for k := len(blocks) - 1; k >= 0 && len(out) < 8*maxSACKWithTS; k-- {
		if b := blocks[k]; !(b[0] <= latest && latest < b[1]) {
			put(b)
		}
	}
	return out
}

// dsackOf encodes a D-SACK block (RFC 2883) reporting [left, right)
// received twice, followed by the payload of further blocks.
func dsackOf(left, right uint32, more []byte) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 8+len(more)), left)
	out = binary.BigEndian.AppendUint32(out, right)
	if len(more) > 8*(maxSACKWithTS-1) {
		more = more[:8*(maxSACKWithTS-1)]
	}
	return append(out, more...)
}

// decodeSACK turns an event payload back into relative blocks.
func decodeSACK(p []byte, b *[capture.MaxSACKBlocks]capture.SACKBlock) []capture.SACKBlock {
	n := 0
	for ; len(p) >= 8 && n < len(b); p = p[8:] {
		b[n] = capture.SACKBlock{Left: binary.BigEndian.Uint32(p), Right: binary.BigEndian.Uint32(p[4:])}
		n++
	}
	return b[:n]
}
