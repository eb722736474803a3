package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.hyspec.backend.Tensor;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@code random_uniform_bf16} against {@code Backend.randomWeight}'s host reference: bit for bit, fresh seeds. */
@Tag("gpu")
class RandomWeightKernelsTest {
    private static final int[][] SHAPES = {{1}, {3, 5}, {257, 129}, {4096, 1000}, {2, 3, 4}, {1 << 21, 9}};

    @Test
    void deviceFillEqualsTheHostReference() {
        CudaBackend gpu = Gpu.backend();
        long[] seedOut = new long[1];
        Random r = Gpu.random(seedOut);
        for (int[] shape : SHAPES) {
            long seed = r.nextLong();
            float center = r.nextBoolean() ? 0f : (float) r.nextGaussian();
            float scale = (float) Math.exp(r.nextGaussian() * 3);
            Tensor dev = gpu.randomWeight(seed, center, scale, shape);
            Tensor host = Gpu.CPU.randomWeight(seed, center, scale, shape);
            float[] want = Gpu.CPU.download(host);
            float[] got = gpu.download(dev);
            assertEquals(want.length, got.length);
            int differing = 0;
            for (int i = 0; i < want.length; i++) {
                differing += Float.floatToRawIntBits(want[i]) == Float.floatToRawIntBits(got[i]) ? 0 : 1;
            }
            String what = "random_uniform_bf16 " + java.util.Arrays.toString(shape) + " (elements differing)";
            Gpu.report(what, differing, 0, want.length);
            assertArrayEquals(want, got, what + " (seed " + seedOut[0] + ")");
            Gpu.free(gpu, dev);
        }
    }
}
