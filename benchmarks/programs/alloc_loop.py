# Same algorithm and output as alloc_loop.mv: n small objects that die at once.
#   python3 alloc_loop.py [n]   (default 10000000)
import sys


class C:
    __slots__ = ("x",)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000000
    i = 0
    while i < n:
        C()
        i = i + 1
    print(i)


main()
