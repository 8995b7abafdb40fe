# Same algorithm and output as fib.mv: naive recursive fib(30).
import sys

sys.setrecursionlimit(10000)


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def main():
    print(fib(30))


main()
