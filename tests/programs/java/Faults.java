/* Faults: a JVM handling its own faults: implicit null checks (SIGSEGV in
 * compiled code), integer division by zero (SIGFPE) and stack overflows
 * (guard pages) caught as exceptions, for 2 s. Prints the same three lines on
 * every run. */
public class Faults {
    static class Node { int value; Node next; }
    static int depth;
    static void recurse() { depth++; recurse(); }
    static int divide(int a, int b) { return a / b; }
    public static void main(String[] args) {
        long npe = 0, div = 0, so = 0;
        Node n = new Node();
        long until = System.nanoTime() + 2_000_000_000L;
        int i = 0;
        while (System.nanoTime() < until) {
            Node m = (i++ % 3 == 0) ? null : n;
            try { n.value += m.value; } catch (NullPointerException e) { npe++; }
            try { n.value += divide(i, i % 5 == 0 ? 0 : 1); } catch (ArithmeticException e) { div++; }
            if (i % 20000 == 0) { try { depth = 0; recurse(); } catch (StackOverflowError e) { so++; } }
        }
        System.out.println("null checks caught: " + (npe > 1000 ? "many" : "few"));
        System.out.println("divisions by zero caught: " + (div > 1000 ? "many" : "few"));
        System.out.println("stack overflows caught: " + (so > 2 ? "several" : "few"));
    }
}
