package dev.hyspec.backend.cuda;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventElapsedTime;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;
import static jcuda.driver.JCudaDriver.cuMemsetD32Async;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cpu.CpuBackend;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Locale;
import java.util.Optional;
import java.util.Random;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUevent;

/**
 * What the kernel tests share: one {@link CudaBackend} for the JVM (tests are skipped where no
 * device is present), the CPU reference, fresh random inputs (the seed is printed with every
 * failure), poisoned outputs, and the relative error of a GPU result against the CPU's, which is
 * printed and, with {@code -Dhyspec.gpu.report=FILE}, appended to a JSON-lines report.
 */
final class Gpu {
    /** Relative error allowed for float32 computations (weights in float32). */
    static final double F32_TOL = 1e-5;
    /** Relative error allowed where bf16 rounding enters. */
    static final double BF16_TOL = 2e-2;

    private static CudaBackend backend;
    private static String missing;

    private Gpu() {}

    /** The shared CUDA backend; skips the calling test where there is no device. */
    static synchronized CudaBackend backend() {
        if (backend == null && missing == null) {
            Optional<String> why = CudaRuntime.unavailableReason();
            if (why.isPresent()) {
                missing = why.get();
            } else {
                backend = new CudaBackend();
            }
        }
        assumeTrue(backend != null, () -> "no CUDA device: " + missing);
        return backend;
    }

    static final CpuBackend CPU = new CpuBackend();

    /** A random generator with a fresh seed each run; the seed goes into failure messages. */
    static Random random(long[] seedOut) {
        long seed = System.nanoTime() ^ Thread.currentThread().getId() * 0x9E3779B97F4A7C15L;
        seedOut[0] = seed;
        return new Random(seed);
    }

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

    /** A GPU float32 tensor filled with NaN, so any element a kernel fails to write shows up. */
    static Tensor poisoned(int... shape) {
        int n = 1;
        for (int d : shape) {
            n *= d;
        }
        float[] nan = new float[n];
        Arrays.fill(nan, Float.NaN);
        return backend().upload(nan, shape);
    }

    /** The same values on both backends. */
    static Tensor[] both(float[] data, int... shape) {
        return new Tensor[] {CPU.upload(data, shape), backend().upload(data, shape)};
    }

    /** {@code max|gpu − cpu| / max(max|cpu|, 1e-30)}; NaN when any GPU element is not finite. */
    static double relativeError(float[] cpu, float[] gpu) {
        if (cpu.length != gpu.length) {
            throw new AssertionError("lengths differ: " + cpu.length + " vs " + gpu.length);
        }
        double maxRef = 0;
        double maxErr = 0;
        for (int i = 0; i < cpu.length; i++) {
            if (!Float.isFinite(gpu[i]) && Float.isFinite(cpu[i])) {
                return Double.NaN;
            }
            maxRef = Math.max(maxRef, Math.abs(cpu[i]));
            maxErr = Math.max(maxErr, Math.abs((double) gpu[i] - cpu[i]));
        }
        return maxErr / Math.max(maxRef, 1e-30);
    }

    /** Downloads both, reports the relative error under {@code what}, fails beyond {@code tol}. */
    static double check(String what, Tensor cpu, Tensor gpu, double tol, long seed) {
        return check(what, CPU.download(cpu), backend().download(gpu), tol, seed);
    }

    static double check(String what, float[] cpu, float[] gpu, double tol, long seed) {
        double err = relativeError(cpu, gpu);
        report(what, err, tol, cpu.length);
        if (!(err <= tol)) {
            int worst = worst(cpu, gpu);
            fail(String.format(Locale.ROOT, "%s: relative error %.3e > %.1e (seed %d; element %d: gpu %s, cpu %s)", what,
                    err, tol, seed, worst, gpu[worst], cpu[worst]));
        }
        return err;
    }

    /**
     * As {@link #check(String, Tensor, Tensor, double, long)} for a matrix product {@code x [T, K] · w [O, K]ᵀ},
     * with the error measured against {@code max(max|cpu|, max ||x_t||·||w_o||)}: the largest any output
     * of the product can be (Cauchy–Schwarz). An output that nearly cancels is then held to the
     * float32 rounding of its terms, not to its own small value.
     */
    static double checkProduct(String what, Tensor cpu, Tensor gpu, float[] x, float[] w, int k, double tol,
                               long seed) {
        float[] c = CPU.download(cpu);
        float[] g = backend().download(gpu);
        double bound = 0;
        for (int t = 0; t < x.length / k; t++) {
            for (int o = 0; o < w.length / k; o++) {
                double xx = 0;
                double ww = 0;
                for (int i = 0; i < k; i++) {
                    xx += (double) x[t * k + i] * x[t * k + i];
                    ww += (double) w[o * k + i] * w[o * k + i];
                }
                bound = Math.max(bound, Math.sqrt(xx * ww));
            }
        }
        double maxRef = 0;
        double maxErr = 0;
        for (int i = 0; i < c.length; i++) {
            maxRef = Math.max(maxRef, Math.abs(c[i]));
            maxErr = Float.isFinite(g[i]) || !Float.isFinite(c[i]) ? Math.max(maxErr, Math.abs((double) g[i] - c[i]))
                    : Double.NaN;
        }
        double err = maxErr / Math.max(Math.max(maxRef, bound), 1e-30);
        report(what, err, tol, c.length);
        if (!(err <= tol)) {
            int worst = worst(c, g);
            fail(String.format(Locale.ROOT, "%s: error %.3e of max(max|cpu|, max ||x||·||w||) > %.1e (seed %d; element "
                    + "%d: gpu %s, cpu %s)", what, err, tol, seed, worst, g[worst], c[worst]));
        }
        return err;
    }

    private static int worst(float[] cpu, float[] gpu) {
        int w = 0;
        double e = -1;
        for (int i = 0; i < cpu.length; i++) {
            double d = Float.isFinite(gpu[i]) ? Math.abs((double) gpu[i] - cpu[i]) : Double.POSITIVE_INFINITY;
            if (d > e) {
                e = d;
                w = i;
            }
        }
        return w;
    }

    static void report(String what, double err, double tol, int elements) {
        String line = String.format(Locale.ROOT, "{\"kernel\":\"%s\",\"relative_error\":%s,\"tolerance\":%s,\"elements\":%d}",
                what.replace("\"", "'"), Double.isNaN(err) ? "null" : String.format(Locale.ROOT, "%.3e", err),
                String.format(Locale.ROOT, "%.0e", tol), elements);
        System.out.println("[gpu] " + line);
        String file = System.getProperty("hyspec.gpu.report");
        if (file != null) {
            try {
                Files.writeString(Path.of(file), line + "\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** Frees tensors of the GPU backend. */
    static void free(Backend b, Tensor... ts) {
        for (Tensor t : ts) {
            b.free(t);
        }
    }

    /**
     * Times {@code op} after {@code warmups} calls: {@code [device µs per call, host wall µs per call]}.
     * Device time: {@code iters} calls queued behind 2 GiB of memsets (longer than issuing them
     * takes), then run back to back between two events; the staging area starts over first, so the
     * calls' staged tables do not wrap it (a wrap synchronises and would stall the queue). Host wall
     * time: the same calls as issued (launch-bound where a kernel is shorter than a launch).
     */
    static double[] deviceAndWallMicros(CudaBackend gpu, Runnable op, int warmups, int iters) {
        CudaRuntime rt = gpu.runtime();
        for (int i = 0; i < warmups; i++) {
            op.run();
        }
        gpu.synchronize();
        rt.restartStaging();
        long blockerWords = 1L << 29;   // 2 GiB
        CUdeviceptr blocker = new CUdeviceptr();
        cuMemAlloc(blocker, blockerWords * 4);
        CUevent start = new CUevent();
        CUevent stop = new CUevent();
        cuEventCreate(start, 0);
        cuEventCreate(stop, 0);
        float[] ms = new float[1];
        try {
            for (int i = 0; i < 14; i++) {
                cuMemsetD32Async(blocker, i, blockerWords, rt.stream());
            }
            cuEventRecord(start, rt.stream());
            for (int i = 0; i < iters; i++) {
                op.run();
            }
            cuEventRecord(stop, rt.stream());
            cuEventSynchronize(stop);
            cuEventElapsedTime(ms, start, stop);
        } finally {
            gpu.synchronize();
            cuEventDestroy(start);
            cuEventDestroy(stop);
            cuMemFree(blocker);
        }
        long t0 = System.nanoTime();
        for (int i = 0; i < iters; i++) {
            op.run();
        }
        gpu.synchronize();
        return new double[] {ms[0] * 1000.0 / iters, (System.nanoTime() - t0) / 1000.0 / iters};
    }
}
