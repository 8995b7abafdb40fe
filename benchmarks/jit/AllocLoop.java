// Same loop as alloc32.mv: n objects with two reference fields, each dead at
// once. The result is stored to a static field so that escape analysis
// cannot remove the allocation.
//   java AllocLoop [n]   (default 100000000)
public final class AllocLoop {
  static final class Pair {
    Object a, b;
    Pair(Object a, Object b) { this.a = a; this.b = b; }
  }

  static Pair sink;

  public static void main(String[] args) {
    long n = args.length > 0 ? Long.parseLong(args[0]) : 100000000L;
    long i = 0;
    while (i < n) {
      sink = new Pair(null, null);
      i = i + 1;
    }
    System.out.println(i);
  }
}
