// Same loop as alloc32.mv: n heap objects with two pointer fields, each dead
// at once (stored to a global so that escape analysis keeps them on the heap).
//   go run alloc_loop.go [n]   (default 100000000)
package main

import (
	"fmt"
	"os"
	"strconv"
)

type Pair struct{ a, b *Pair }

var sink *Pair

func main() {
	n := int64(100000000)
	if len(os.Args) > 1 {
		n, _ = strconv.ParseInt(os.Args[1], 10, 64)
	}
	i := int64(0)
	for i < n {
		sink = &Pair{nil, nil}
		i = i + 1
	}
	fmt.Println(i)
}
