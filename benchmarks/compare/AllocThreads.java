// Same algorithm and output as alloc_threads.mv: N threads each allocate M
// small objects that die young, each kept only in a 16-slot ring (so escape
// analysis cannot remove the allocation).
//   java AllocThreads [threads] [objects_per_thread]   (default 4 2000000)
public final class AllocThreads {
  static final class C {
    long value;
    C next;
    C(long value, C next) { this.value = value; this.next = next; }
  }

  static long work(long m) {
    C[] keep = new C[16];
    long sum = 0;
    for (long i = 0; i < m; i++) {
      C c = new C(i, null);
      keep[(int) (i & 15)] = c;
    }
    for (int j = 0; j < 16; j++) sum += keep[j].value;
    return sum;
  }

  public static void main(String[] args) throws InterruptedException {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 4;
    long m = args.length > 1 ? Long.parseLong(args[1]) : 2000000;
    long[] results = new long[n];
    Thread[] threads = new Thread[n];
    for (int t = 0; t < n; t++) {
      final int id = t;
      threads[t] = new Thread(() -> results[id] = work(m));
      threads[t].start();
    }
    long total = 0;
    for (int t = 0; t < n; t++) {
      threads[t].join();
      total += results[t];
    }
    System.out.println(n + " threads x " + m + " objects, check: " + total);
  }
}
