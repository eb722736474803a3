package dev.hyspec.sampling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

/** Pearson's chi-square goodness-of-fit for the statistical tests. */
final class Stats {
    private Stats() {}

    /**
     * Upper critical values of the chi-square distribution at significance 1e-6, indexed by
     * degrees of freedom (index 0 unused): {@code scipy.stats.chi2.isf(1e-6, df)}, df = 1…40.
     */
    static final double[] CHI2_CRIT_1E6 = {
        Double.NaN,
        23.9281, 27.6310, 30.6648, 33.3768, 35.8882, 38.2583, 40.5218, 42.7009, 44.8109, 46.8630,
        48.8656, 50.8253, 52.7471, 54.6353, 56.4934, 58.3244, 60.1306, 61.9142, 63.6771, 65.4207,
        67.1465, 68.8558, 70.5496, 72.2289, 73.8945, 75.5474, 77.1882, 78.8175, 80.4360, 82.0441,
        83.6425, 85.2316, 86.8117, 88.3833, 89.9467, 91.5024, 93.0506, 94.5915, 96.1256, 97.6530,
    };

    /** Pearson's statistic over the cells of positive probability; +inf if a zero cell was hit. */
    static double chiSquare(long[] counts, double[] probs) {
        long n = Arrays.stream(counts).sum();
        double stat = 0;
        for (int i = 0; i < counts.length; i++) {
            if (probs[i] == 0) {
                if (counts[i] != 0) {
                    return Double.POSITIVE_INFINITY;
                }
                continue;
            }
            double e = n * probs[i];
            double d = counts[i] - e;
            stat += d * d / e;
        }
        return stat;
    }

    static double chiSquare(long[] counts, float[] probs) {
        return chiSquare(counts, toDouble(probs));
    }

    static int degreesOfFreedom(double[] probs) {
        return (int) Arrays.stream(probs).filter(p -> p > 0).count() - 1;
    }

    /** The 1e-6 critical value for the cells of {@code probs}. */
    static double critical(double[] probs) {
        return CHI2_CRIT_1E6[degreesOfFreedom(probs)];
    }

    /** Asserts {@code counts} is consistent with {@code probs} at significance 1e-6. */
    static void assertFits(long[] counts, double[] probs, String what) {
        double sum = Arrays.stream(probs).sum();
        assertEquals(1.0, sum, 1e-6, what + ": expected probabilities must sum to 1");
        double stat = chiSquare(counts, probs);
        double crit = critical(probs);
        assertTrue(stat < crit, () -> what + ": chi-square " + stat + " >= " + crit + " (df "
                + degreesOfFreedom(probs) + ")\n counts   " + Arrays.toString(counts)
                + "\n expected " + Arrays.toString(scaled(probs, Arrays.stream(counts).sum())));
    }

    static double[] toDouble(float[] p) {
        double[] d = new double[p.length];
        for (int i = 0; i < p.length; i++) {
            d[i] = p[i];
        }
        return d;
    }

    /** Outer product {@code a ⊗ b} flattened row-major: cell {@code i·|b| + j}. */
    static double[] outer(double[] a, double[] b) {
        double[] o = new double[a.length * b.length];
        for (int i = 0; i < a.length; i++) {
            for (int j = 0; j < b.length; j++) {
                o[i * b.length + j] = a[i] * b[j];
            }
        }
        return o;
    }

    private static long[] scaled(double[] p, long n) {
        long[] e = new long[p.length];
        for (int i = 0; i < p.length; i++) {
            e[i] = Math.round(p[i] * n);
        }
        return e;
    }
}
