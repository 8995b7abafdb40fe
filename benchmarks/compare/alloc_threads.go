// Same algorithm and output as alloc_threads.mv: N goroutines each allocate
// M small objects that die young, each kept only in a 16-slot ring (so
// escape analysis cannot keep them on the stack).
//   alloc_threads [threads] [objects_per_thread]   (default 4 2000000)
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

type C struct {
	value int64
	next  *C
}

//go:noinline
func work(m int64) int64 {
	var keep [16]*C
	var sum int64
	for i := int64(0); i < m; i++ {
		c := &C{value: i}
		keep[i&15] = c
	}
	for j := 0; j < 16; j++ {
		sum += keep[j].value
	}
	return sum
}

func main() {
	n := 4
	m := int64(2000000)
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		m, _ = strconv.ParseInt(os.Args[2], 10, 64)
	}
	results := make([]int64, n)
	var wg sync.WaitGroup
	for t := 0; t < n; t++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			results[id] = work(m)
		}(t)
	}
	wg.Wait()
	var total int64
	for _, r := range results {
		total += r
	}
	fmt.Printf("%d threads x %d objects, check: %d\n", n, m, total)
}
