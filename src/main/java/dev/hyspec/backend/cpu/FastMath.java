package dev.hyspec.backend.cpu;

/**
 * The inner loops of the CPU backend: the Vector API path when {@code jdk.incubator.vector} is in
 * the boot layer (run with {@code --add-modules jdk.incubator.vector}), else plain scalar loops.
 */
final class FastMath {
    static final boolean VECTOR = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent()
            && !Boolean.getBoolean("hyspec.cpu.scalar");

    private FastMath() {}

    /** {@code Σ_i a[aOff + i] · b[bOff + i]}. */
    static float dot(float[] a, int aOff, float[] b, int bOff, int n) {
        if (VECTOR) {
            return VectorMath.dot(a, aOff, b, bOff, n);
        }
        float sum = 0f;
        for (int i = 0; i < n; i++) {
            sum += a[aOff + i] * b[bOff + i];
        }
        return sum;
    }

    /** {@code y[yOff + i] += alpha · x[xOff + i]}. */
    static void axpy(float alpha, float[] x, int xOff, float[] y, int yOff, int n) {
        if (VECTOR) {
            VectorMath.axpy(alpha, x, xOff, y, yOff, n);
            return;
        }
        for (int i = 0; i < n; i++) {
            y[yOff + i] += alpha * x[xOff + i];
        }
    }

    static float silu(float x) {
        return x / (1f + (float) Math.exp(-x));
    }

    static float sigmoid(float x) {
        return 1f / (1f + (float) Math.exp(-x));
    }

    /** {@code log(1 + e^x)}, as torch's softplus (linear above 20). */
    static float softplus(float x) {
        return x > 20f ? x : (float) Math.log1p(Math.exp(x));
    }
}
