package dev.hyspec.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.checkpoint.DType;
import org.junit.jupiter.api.Test;

/** The counter-based uniforms behind random weights, and the reference {@link Backend#randomWeight}. */
class HashUniformTest {

    @Test
    void valuesAreUniformInTheirRangeAndDependOnlyOnSeedAndIndex() {
        int n = 200_000;
        double sum = 0;
        double sumSq = 0;
        float lo = Float.MAX_VALUE;
        float hi = -Float.MAX_VALUE;
        for (int i = 0; i < n; i++) {
            float v = HashUniform.value(42, i, 1.5f, 0.25f);
            assertEquals(v, HashUniform.value(42, i, 1.5f, 0.25f));
            lo = Math.min(lo, v);
            hi = Math.max(hi, v);
            sum += v;
            sumSq += (v - 1.5) * (v - 1.5);
        }
        assertTrue(lo >= 1.25f && hi < 1.75f, "range [" + lo + ", " + hi + "]");
        assertEquals(1.5, sum / n, 2e-3);
        assertEquals(0.25 * 0.25 / 3, sumSq / n, 1e-3);   // variance of U(−s, s) is s²/3
        assertNotEquals(HashUniform.value(42, 7, 0, 1), HashUniform.value(43, 7, 0, 1));
        assertNotEquals(HashUniform.seed(1, "a.weight"), HashUniform.seed(1, "b.weight"));
    }

    @Test
    void bf16RoundsToNearestEven() {
        assertEquals((short) 0x3f80, DType.floatToBf16(1f));
        assertEquals((short) 0x3f80, DType.floatToBf16(Float.intBitsToFloat(0x3f808000)));   // tie → even
        assertEquals((short) 0x3f82, DType.floatToBf16(Float.intBitsToFloat(0x3f818000)));   // tie → even
        assertEquals((short) 0x3f81, DType.floatToBf16(Float.intBitsToFloat(0x3f808001)));
        assertEquals((short) 0xbf80, DType.floatToBf16(-1f));
    }

    @Test
    void randomWeightHoldsTheHashValuesInBf16() {
        CpuBackend cpu = new CpuBackend();
        Tensor w = cpu.randomWeight(9, 0f, 0.5f, 3, 7);
        assertEquals(3, w.rows());
        assertEquals(7, w.cols());
        float[] got = cpu.download(cpu.randomWeight(9, 0f, 0.5f, 21));
        for (int i = 0; i < got.length; i++) {
            assertEquals(DType.bf16ToFloat(HashUniform.bf16(9, i, 0f, 0.5f)), got[i]);
            assertEquals(HashUniform.value(9, i, 0f, 0.5f), got[i], 0.5f / 128);
        }
    }
}
