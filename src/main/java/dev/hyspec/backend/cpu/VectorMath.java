package dev.hyspec.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Vector API (jdk.incubator.vector) versions of the hot loops. Only loaded when the module is
 * present ({@link FastMath}); each method handles the tail of odd sizes with scalar code.
 */
final class VectorMath {
    private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;

    private VectorMath() {}

    static float dot(float[] a, int aOff, float[] b, int bOff, int n) {
        int i = 0;
        int bound = S.loopBound(n);
        FloatVector acc = FloatVector.zero(S);
        for (; i < bound; i += S.length()) {
            acc = FloatVector.fromArray(S, a, aOff + i).fma(FloatVector.fromArray(S, b, bOff + i), acc);
        }
        float sum = acc.reduceLanes(VectorOperators.ADD);
        for (; i < n; i++) {
            sum += a[aOff + i] * b[bOff + i];
        }
        return sum;
    }

    /** {@code y[yOff + i] += alpha · x[xOff + i]}. */
    static void axpy(float alpha, float[] x, int xOff, float[] y, int yOff, int n) {
        int i = 0;
        int bound = S.loopBound(n);
        FloatVector va = FloatVector.broadcast(S, alpha);
        for (; i < bound; i += S.length()) {
            FloatVector.fromArray(S, x, xOff + i).fma(va, FloatVector.fromArray(S, y, yOff + i))
                    .intoArray(y, yOff + i);
        }
        for (; i < n; i++) {
            y[yOff + i] += alpha * x[xOff + i];
        }
    }
}
