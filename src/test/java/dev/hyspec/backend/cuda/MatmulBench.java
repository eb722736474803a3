package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import java.util.Locale;
import java.util.Random;

/**
 * Times matmul at Nemotron-H-8B-like shapes (bf16 weights [out, in]) in both precisions and prints
 * each figure next to its floor: weight bytes at 3.0 TB/s (DESIGN §9) for decode shapes, TFLOP/s
 * for prefill. Run on the device: {@code java -cp ... dev.hyspec.backend.cuda.MatmulBench}.
 */
final class MatmulBench {
    private static final double BANDWIDTH = 3.0e12;

    public static void main(String[] args) {
        int[][] shapes = {{4096, 4096}, {21504, 4096}, {4096, 21504}, {32768, 4096}};
        for (CudaBackend.Precision p : CudaBackend.Precision.values()) {
            try (CudaBackend gpu = new CudaBackend(p)) {
                Random r = new Random(1);
                for (int[] s : shapes) {
                    int out = s[0];
                    int in = s[1];
                    float[] w = WeightEntries.representable(Gpu.normal(r, out * in, 0.02), DType.BF16);
                    Tensor wt = gpu.weight(WeightEntries.entry("w", DType.BF16, w, out, in));
                    for (int t : new int[] {1, 4, 16, 512}) {
                        Tensor x = gpu.upload(Gpu.normal(r, t * in, 1), t, in);
                        Tensor y = gpu.zeros(t, out);
                        int reps = t >= 512 ? 10 : 50;
                        gpu.matmul(x, wt, null, y);
                        gpu.synchronize();
                        long t0 = System.nanoTime();
                        for (int i = 0; i < reps; i++) {
                            gpu.matmul(x, wt, null, y);
                        }
                        gpu.synchronize();
                        double sec = (System.nanoTime() - t0) / 1e9 / reps;
                        double floor = (2.0 * out * in + 4.0 * t * (in + out)) / BANDWIDTH;
                        double tflops = 2.0 * t * in * out / sec / 1e12;
                        System.out.printf(Locale.ROOT,
                                "[bench] %-7s w bf16 [%6d, %5d] T=%3d: %8.1f us  floor %7.1f us (%.2fx)  %6.1f TFLOP/s%n",
                                p, out, in, t, sec * 1e6, floor * 1e6, sec / floor, tflops);
                        gpu.free(x);
                        gpu.free(y);
                    }
                    gpu.free(wt);
                }
            }
        }
    }
}
