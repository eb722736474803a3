package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Tensor;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The dense kernels against the CPU reference, on fresh random inputs. */
@Tag("gpu")
class DenseKernelsTest {

    @Test
    void add() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int n : new int[] {1, 255, 4097, 100_003}) {
            float[] a = Gpu.normal(r, n, 1);
            float[] b = Gpu.normal(r, n, 1);
            Tensor[] ta = Gpu.both(a, n);
            Tensor[] tb = Gpu.both(b, n);
            Tensor cpuOut = Gpu.CPU.zeros(n);
            Gpu.CPU.add(ta[0], tb[0], cpuOut);
            Tensor out = Gpu.poisoned(n);
            gpu.add(ta[1], tb[1], out);
            Gpu.check("add n=" + n, cpuOut, out, Gpu.F32_TOL, seed[0]);
            Gpu.free(gpu, ta[1], tb[1], out);
        }
    }
}
