// Same algorithm and output as alloc_mix.mv: per iteration a 2-field node and
// a 24-byte slice, every 16th a 1,000-byte, every 1,024th a 100 KB and every
// 32,768th a 2 MiB byte slice, each kept only in a small ring (so escape
// analysis keeps them on the heap). Go sizes: node 16 B, the byte slices'
// arrays 24 B, 1,024 B (size class) and, above 32 KiB, whole pages.
//
//	alloc_mix [n]   (default 1000000 iterations)
package main

import (
	"fmt"
	"os"
	"strconv"
)

type Node struct {
	value int64
	next  *Node
}

func node(ring []*Node, i int64) { ring[i&15] = &Node{value: i} }

// Each slice gets k's low bytes at both ends, which the checksum reads back.
func fill(ring [][]byte, slot int64, b []byte, k int64) {
	b[0] = byte(k & 255)
	b[len(b)-1] = byte((k >> 8) & 255)
	ring[slot] = b
}

func small(ring [][]byte, i int64)  { fill(ring, i&15, make([]byte, 24), i) }
func medium(ring [][]byte, k int64) { fill(ring, k&15, make([]byte, 1000), k) }
func large(ring [][]byte, k int64)  { fill(ring, k&7, make([]byte, 102400), k) }
func huge(ring [][]byte, k int64)   { fill(ring, k&3, make([]byte, 2097152), k) }

func ringSum(ring [][]byte) int64 {
	var sum int64
	for _, b := range ring {
		if b != nil {
			sum += int64(b[0]) + int64(b[len(b)-1])
		}
	}
	return sum
}

func main() {
	n := int64(1000000)
	if len(os.Args) > 1 {
		n, _ = strconv.ParseInt(os.Args[1], 10, 64)
	}
	nodes := make([]*Node, 16)
	smalls := make([][]byte, 16)
	mediums := make([][]byte, 16)
	larges := make([][]byte, 8)
	huges := make([][]byte, 4)
	for i := int64(0); i < n; i++ {
		node(nodes, i)
		small(smalls, i)
		if i&15 == 0 {
			medium(mediums, i>>4)
		}
		if i&1023 == 0 {
			large(larges, i>>10)
		}
		if i&32767 == 0 {
			huge(huges, i>>15)
		}
	}
	var check int64
	for _, x := range nodes {
		if x != nil {
			check += x.value
		}
	}
	check += ringSum(smalls) + ringSum(mediums) + ringSum(larges) + ringSum(huges)
	// Objects allocated: one i in every 2^s of [0, n) is a multiple of 2^s.
	objects := 2*n + (n+15)>>4 + (n+1023)>>10 + (n+32767)>>15
	fmt.Printf("alloc_mix %d iterations: %d objects, check: %d\n", n, objects, check)
}
