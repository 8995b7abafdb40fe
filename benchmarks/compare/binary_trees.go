// Same algorithm and output as benchmarks/programs/binary_trees.mv (the
// benchmarks-game binary-trees, single goroutine): many short-lived complete
// binary trees plus one long-lived tree.
//   binary_trees [max_depth]   (default 10)
package main

import (
	"fmt"
	"os"
	"strconv"
)

type Node struct {
	left, right *Node
}

func bottomUp(depth int) *Node {
	if depth == 0 {
		return &Node{}
	}
	return &Node{bottomUp(depth - 1), bottomUp(depth - 1)}
}

func check(tree *Node) int64 {
	if tree.left == nil {
		return 1
	}
	return 1 + check(tree.left) + check(tree.right)
}

func main() {
	n := 10
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	minDepth := 4
	maxDepth := n
	if minDepth+2 > n {
		maxDepth = minDepth + 2
	}

	stretch := maxDepth + 1
	fmt.Printf("stretch tree of depth %d\t check: %d\n", stretch, check(bottomUp(stretch)))

	longLived := bottomUp(maxDepth)

	for depth := minDepth; depth <= maxDepth; depth += 2 {
		iterations := int64(1) << (maxDepth - depth + minDepth)
		var sum int64
		for i := int64(0); i < iterations; i++ {
			sum += check(bottomUp(depth))
		}
		fmt.Printf("%d\t trees of depth %d\t check: %d\n", iterations, depth, sum)
	}

	fmt.Printf("long lived tree of depth %d\t check: %d\n", maxDepth, check(longLived))
}
