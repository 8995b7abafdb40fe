// Same algorithm and output as alloc_mix.mv: per iteration a 2-field node and
// a 24-byte array, every 16th a 1,000-byte, every 1,024th a 100 KB and every
// 32,768th a 2 MiB byte array, each kept only in a small ring (so escape
// analysis cannot remove the allocation). HotSpot sizes (compressed oops):
// node 24 B, byte[n] 16 + n rounded to 8; with a 1 GiB heap G1's regions are
// 1 MiB, so the 2 MiB arrays are humongous objects.
//   java AllocMix [n]   (default 1000000 iterations)
public final class AllocMix {
  static final class Node {
    long value;
    Node next;
    Node(long value, Node next) { this.value = value; this.next = next; }
  }

  static void node(Node[] ring, long i) { ring[(int) (i & 15)] = new Node(i, null); }

  // Each array gets k's low bytes at both ends, which the checksum reads back.
  static void fill(byte[][] ring, int slot, byte[] b, long k) {
    b[0] = (byte) (k & 255);
    b[b.length - 1] = (byte) ((k >> 8) & 255);
    ring[slot] = b;
  }

  static void small(byte[][] ring, long i) { fill(ring, (int) (i & 15), new byte[24], i); }
  static void medium(byte[][] ring, long k) { fill(ring, (int) (k & 15), new byte[1000], k); }
  static void large(byte[][] ring, long k) { fill(ring, (int) (k & 7), new byte[102400], k); }
  static void huge(byte[][] ring, long k) { fill(ring, (int) (k & 3), new byte[2097152], k); }

  static long ringSum(byte[][] ring) {
    long sum = 0;
    for (byte[] b : ring) {
      if (b != null) sum += (b[0] & 255) + (b[b.length - 1] & 255);
    }
    return sum;
  }

  public static void main(String[] args) {
    long n = args.length > 0 ? Long.parseLong(args[0]) : 1000000;
    Node[] nodes = new Node[16];
    byte[][] smalls = new byte[16][];
    byte[][] mediums = new byte[16][];
    byte[][] larges = new byte[8][];
    byte[][] huges = new byte[4][];
    for (long i = 0; i < n; i++) {
      node(nodes, i);
      small(smalls, i);
      if ((i & 15) == 0) medium(mediums, i >> 4);
      if ((i & 1023) == 0) large(larges, i >> 10);
      if ((i & 32767) == 0) huge(huges, i >> 15);
    }
    long check = 0;
    for (Node x : nodes) {
      if (x != null) check += x.value;
    }
    check += ringSum(smalls) + ringSum(mediums) + ringSum(larges) + ringSum(huges);
    // Objects allocated: one i in every 2^s of [0, n) is a multiple of 2^s.
    long objects = 2 * n + ((n + 15) >> 4) + ((n + 1023) >> 10) + ((n + 32767) >> 15);
    System.out.println("alloc_mix " + n + " iterations: " + objects + " objects, check: " + check);
  }
}
