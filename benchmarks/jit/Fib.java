// Same as fib.mv. long, not int: minivm's integers are 63-bit.
//   java Fib [n]   (default 32)
public final class Fib {
  static long fib(long n) {
    if (n < 2) return n;
    return fib(n - 1) + fib(n - 2);
  }

  public static void main(String[] args) {
    long n = args.length > 0 ? Long.parseLong(args[0]) : 32;
    System.out.println(fib(n));
  }
}
