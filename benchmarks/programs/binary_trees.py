# Same algorithm and output as binary_trees.mv (benchmarks-game binary-trees).
#   python3 binary_trees.py [max_depth]   (default 10)
import sys


class Node:
    __slots__ = ("left", "right")

    def __init__(self, left, right):
        self.left = left
        self.right = right


def bottom_up(depth):
    if depth == 0:
        return Node(None, None)
    return Node(bottom_up(depth - 1), bottom_up(depth - 1))


def check(tree):
    if tree.left is None:
        return 1
    return 1 + check(tree.left) + check(tree.right)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    min_depth = 4
    max_depth = max(min_depth + 2, n)

    stretch = max_depth + 1
    print("stretch tree of depth " + str(stretch) + "\t check: " + str(check(bottom_up(stretch))))

    long_lived = bottom_up(max_depth)

    for depth in range(min_depth, max_depth + 1, 2):
        iterations = 2 ** (max_depth - depth + min_depth)
        total = 0
        for _ in range(iterations):
            total += check(bottom_up(depth))
        print(str(iterations) + "\t trees of depth " + str(depth) + "\t check: " + str(total))

    print("long lived tree of depth " + str(max_depth) + "\t check: " + str(check(long_lived)))


main()
