package dev.hyspec.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Arrays;
import java.util.Random;

/** Random inputs and tolerance checks shared by the CPU backend tests. */
final class TestData {
    private TestData() {}

    static float[] normal(Random r, int n, double scale) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (r.nextGaussian() * scale);
        }
        return a;
    }

    static float[] uniform(Random r, int n, double lo, double hi) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (lo + (hi - lo) * r.nextDouble());
        }
        return a;
    }

    static double[] toDouble(float[] a) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) {
            d[i] = a[i];
        }
        return d;
    }

    /**
     * {@code |actual − expected| ≤ tol · max(1, max|expected|)} elementwise: a relative bound for
     * values of order one and above, absolute below.
     */
    static void assertClose(String what, double[] expected, float[] actual, double tol) {
        assertEquals(expected.length, actual.length, what + ": length");
        double scale = 1.0;
        for (double e : expected) {
            scale = Math.max(scale, Math.abs(e));
        }
        for (int i = 0; i < expected.length; i++) {
            double err = Math.abs(actual[i] - expected[i]);
            if (!(err <= tol * scale)) {
                fail(what + ": element " + i + " is " + actual[i] + ", expected " + expected[i] + " (error " + err
                        + ", allowed " + tol * scale + ")");
            }
        }
    }

    static void assertClose(String what, float[] expected, float[] actual, double tol) {
        assertClose(what, toDouble(expected), actual, tol);
    }

    static float[] rows(float[] a, int width, int from, int to) {
        return Arrays.copyOfRange(a, from * width, to * width);
    }
}
