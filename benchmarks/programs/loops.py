# Same algorithm and output as loops.mv: a tight integer loop.
#   python3 loops.py [n]   (default 30000000)
import sys


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30000000
    total = 0
    i = 0
    while i < n:
        total = total + i % 7
        if total > 1000000000:
            total = total - 1000000000
        i = i + 1
    print(total)


main()
