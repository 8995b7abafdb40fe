// Same algorithm and output as benchmarks/programs/binary_trees.mv (the
// benchmarks-game binary-trees, single-threaded): many short-lived complete
// binary trees plus one long-lived tree.
//   java BinaryTrees [max_depth]   (default 10)
public final class BinaryTrees {
  static final class Node {
    final Node left, right;
    Node(Node left, Node right) { this.left = left; this.right = right; }
  }

  static Node bottomUp(int depth) {
    if (depth == 0) return new Node(null, null);
    return new Node(bottomUp(depth - 1), bottomUp(depth - 1));
  }

  static long check(Node tree) {
    if (tree.left == null) return 1;
    return 1 + check(tree.left) + check(tree.right);
  }

  public static void main(String[] args) {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 10;
    int minDepth = 4;
    int maxDepth = Math.max(minDepth + 2, n);

    int stretch = maxDepth + 1;
    System.out.println("stretch tree of depth " + stretch + "\t check: " + check(bottomUp(stretch)));

    Node longLived = bottomUp(maxDepth);

    for (int depth = minDepth; depth <= maxDepth; depth += 2) {
      long iterations = 1L << (maxDepth - depth + minDepth);
      long sum = 0;
      for (long i = 0; i < iterations; i++) sum += check(bottomUp(depth));
      System.out.println(iterations + "\t trees of depth " + depth + "\t check: " + sum);
    }

    System.out.println("long lived tree of depth " + maxDepth + "\t check: " + check(longLived));
  }
}
