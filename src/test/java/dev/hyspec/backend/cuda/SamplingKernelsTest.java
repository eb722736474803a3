package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import dev.hyspec.backend.SamplingRows;
import dev.hyspec.backend.Tensor;
import dev.hyspec.sampling.RandomSource;
import dev.hyspec.sampling.Sampler;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The device's greedy and sampled picks against the CPU's (which are Sampler's), on fresh random logits. */
@Tag("gpu")
class SamplingKernelsTest {
    private static final int[] VOCABS = {1, 2, 33, 1000, 32_000, 151_936};
    private static final double[] TEMPERATURES = {0.0, 1e-6, 0.05, 0.3, 0.7, 1.0, 1.5};
    private static final double[] TOP_PS = {1.0, 1.0, 0.99, 0.95, 0.8, 0.5, 0.1, 1e-4};

    @Test
    void argmax() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        for (int vocab : VOCABS) {
            int rows = vocab > 10_000 ? 24 : 64;
            float[] logits = logits(r, rows, vocab);
            Tensor dev = gpu.upload(logits, rows, vocab);
            int[] want = Gpu.CPU.argmax(Gpu.CPU.upload(logits, rows, vocab));
            int[] got = gpu.argmax(dev);
            Gpu.report("argmax V=" + vocab + " (rows differing)", mismatches(want, got), 0, rows);
            assertArrayEquals(want, got, "argmax V=" + vocab + " (seed " + seed[0] + ")");
            Gpu.free(gpu, dev);
        }
    }

    @Test
    void sample() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int totalRows = 0;
        for (int vocab : VOCABS) {
            for (int round = 0; round < 2; round++) {
                int rows = vocab > 10_000 ? 48 : 128;
                float[] logits = logits(r, rows, vocab);
                double[] temperature = new double[rows];
                int[] topK = new int[rows];
                double[] topP = new double[rows];
                double[] uniform = new double[rows];
                for (int i = 0; i < rows; i++) {
                    temperature[i] = TEMPERATURES[r.nextInt(TEMPERATURES.length)];
                    topK[i] = topK(r, vocab);
                    topP[i] = r.nextInt(4) == 0 ? r.nextDouble() * 0.999 + 0.001 : TOP_PS[r.nextInt(TOP_PS.length)];
                    uniform[i] = switch (r.nextInt(16)) {
                        case 0 -> 0.0;
                        case 1 -> 1.0 - 0x1.0p-53;
                        default -> RandomSource.seeded(r.nextLong()).nextDouble();
                    };
                }
                Tensor dev = gpu.upload(logits, rows, vocab);
                int[] want = Gpu.CPU.sample(Gpu.CPU.upload(logits, rows, vocab), temperature, topK, topP, uniform);
                int[] got = gpu.sample(dev, temperature, topK, topP, uniform);
                // u within 1e-9 of 1 draws from the distribution's last 1e-9 of mass, where which
                // token the inverse CDF lands on turns on the float64 summation order (index order on the
                // CPU, a block scan on the GPU): there the GPU's pick must be a kept token in that tail
                for (int i = 0; i < rows; i++) {
                    if (uniform[i] > 1 - 1e-9 && want[i] != got[i] && inTail(logits, vocab, i, temperature, topK,
                            topP, got[i], 1e-9)) {
                        got[i] = want[i];
                    }
                }
                int bad = mismatches(want, got);
                Gpu.report("sample V=" + vocab + " round " + round + " (rows differing)", bad, 0, rows);
                if (bad > 0) {
                    StringBuilder why = new StringBuilder();
                    for (int i = 0; i < rows; i++) {
                        if (want[i] != got[i]) {
                            why.append(String.format(Locale.ROOT,
                                    "%n  row %d: T=%s topK=%d topP=%s u=%s: cpu %d (logit %s), gpu %d (logit %s)", i,
                                    temperature[i], topK[i], topP[i], uniform[i], want[i], logits[i * vocab + want[i]],
                                    got[i], got[i] < 0 || got[i] >= vocab ? "-" : logits[i * vocab + got[i]]));
                        }
                    }
                    fail("sample V=" + vocab + ": " + bad + " of " + rows + " rows differ (seed " + seed[0] + ")" + why);
                }
                totalRows += rows;
                Gpu.free(gpu, dev);
            }
        }
        System.out.println("[gpu] sample: " + totalRows + " rows equal to the CPU's picks");
    }

    /**
     * Whether {@code pick} is a token row {@code r} keeps (positive probability) with at most
     * {@code tail} of the probability mass at indices after it: the CPU sampler's distribution.
     */
    private static boolean inTail(float[] logits, int vocab, int r, double[] temperature, int[] topK, double[] topP,
                                  int pick, double tail) {
        if (pick < 0 || pick >= vocab) {
            return false;
        }
        float[] row = Arrays.copyOfRange(logits, r * vocab, (r + 1) * vocab);
        float[] probs = new Sampler().probs(row, SamplingRows.params(r, temperature, topK, topP));
        double total = 0;
        double after = 0;
        for (int i = 0; i < vocab; i++) {
            total += probs[i];
            after += i > pick ? probs[i] : 0;
        }
        return probs[pick] > 0 && after <= tail * total;
    }

    @Test
    void greedyOnlyBatchesAndTheirTiming() {
        CudaBackend gpu = Gpu.backend();
        long[] seed = new long[1];
        Random r = Gpu.random(seed);
        int rows = 64;
        int vocab = 151_936;
        float[] logits = Gpu.normal(r, rows * vocab, 3);
        Tensor dev = gpu.upload(logits, rows, vocab);
        double[] zero = new double[rows];
        double[] one = new double[rows];
        Arrays.fill(one, 1.0);
        int[] noK = new int[rows];
        double[] half = new double[rows];
        Arrays.fill(half, 0.5);
        assertArrayEquals(Gpu.CPU.argmax(Gpu.CPU.upload(logits, rows, vocab)), gpu.sample(dev, zero, noK, one, half));
        // timing, for information: 64 rows of a Qwen-sized vocabulary
        double[] topP = new double[rows];
        Arrays.fill(topP, 0.9);
        int[] topK = new int[rows];
        Arrays.fill(topK, 50);
        for (int i = 0; i < 3; i++) {
            gpu.argmax(dev);
            gpu.sample(dev, one, noK, topP, half);
            gpu.sample(dev, one, topK, one, half);
        }
        System.out.printf(Locale.ROOT, "[gpu] 64 x 151936: argmax %.3f ms, top-p 0.9 %.3f ms, top-k 50 %.3f ms%n",
                millis(() -> gpu.argmax(dev)), millis(() -> gpu.sample(dev, one, noK, topP, half)),
                millis(() -> gpu.sample(dev, one, topK, one, half)));
        Gpu.free(gpu, dev);
    }

    @Test
    void rejectsRowsSamplerRejects() {
        CudaBackend gpu = Gpu.backend();
        float[] logits = {0f, 1f, 2f, 0f, Float.NaN, 1f, Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY,
            Float.NEGATIVE_INFINITY, 0f, Float.POSITIVE_INFINITY, 1f};
        for (int row = 1; row < 4; row++) {
            Tensor t = gpu.upload(Arrays.copyOfRange(logits, row * 3, row * 3 + 3), 1, 3);
            assertThrows(IllegalArgumentException.class, () -> gpu.argmax(t), "row " + row);
            assertThrows(IllegalArgumentException.class,
                    () -> gpu.sample(t, new double[] {1}, new int[] {0}, new double[] {0.9}, new double[] {0.5}));
            Gpu.free(gpu, t);
        }
        Tensor ok = gpu.upload(Arrays.copyOfRange(logits, 0, 3), 1, 3);
        assertArrayEquals(new int[] {2}, gpu.argmax(ok));
        assertThrows(IllegalArgumentException.class,
                () -> gpu.sample(ok, new double[] {1}, new int[] {0}, new double[] {0.9}, new double[] {1.0}));
        Gpu.free(gpu, ok);
    }

    private static double millis(Runnable op) {
        int n = 20;
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            op.run();   // each returns host picks: synchronous
        }
        return (System.nanoTime() - t0) / 1e6 / n;
    }

    private static int mismatches(int[] want, int[] got) {
        int bad = 0;
        for (int i = 0; i < want.length; i++) {
            bad += want[i] != got[i] ? 1 : 0;
        }
        return bad;
    }

    private static int topK(Random r, int vocab) {
        return switch (r.nextInt(6)) {
            case 0 -> -1;
            case 1 -> 0;
            case 2 -> 1 + r.nextInt(Math.min(vocab, 50));
            case 3 -> Math.max(1, vocab - 1);
            case 4 -> vocab;
            default -> 1 + r.nextInt(vocab);
        };
    }

    /**
     * Rows of one of three kinds: Gaussian (scale 1…8), a coarse grid with many equal values and −0.0
     * next to 0.0, or a peaked row; some entries masked to −inf, every row with a finite value.
     */
    private static float[] logits(Random r, int rows, int vocab) {
        float[] a = new float[rows * vocab];
        for (int i = 0; i < rows; i++) {
            int kind = r.nextInt(3);
            double scale = 1 + 7 * r.nextDouble();
            for (int j = 0; j < vocab; j++) {
                float v = switch (kind) {
                    case 0 -> (float) (r.nextGaussian() * scale);
                    case 1 -> r.nextInt(9) * 0.5f - 2f;
                    default -> (float) (r.nextGaussian() - 4);
                };
                if (kind == 1 && v == 0f && r.nextBoolean()) {
                    v = -0f;
                }
                a[i * vocab + j] = r.nextInt(25) == 0 ? Float.NEGATIVE_INFINITY : v;
            }
            if (kind == 2) {
                a[i * vocab + r.nextInt(vocab)] = (float) (10 + r.nextDouble() * 10);
            }
            a[i * vocab + r.nextInt(vocab)] = (float) r.nextGaussian();   // at least one finite value
        }
        return a;
    }
}
