package dev.hyspec.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.hyspec.backend.Tensor;
import dev.hyspec.sampling.RandomSource;
import dev.hyspec.sampling.Sampler;
import dev.hyspec.sampling.SamplingParams;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** {@link CpuBackend#argmax} and {@link CpuBackend#sample} are {@link Sampler}'s picks, row by row. */
class SamplingOpsTest {
    private final CpuBackend be = new CpuBackend();
    private final Sampler sampler = new Sampler();

    @Test
    void argmaxIsTheGreedyPickWithTiesToTheLowestIndex() {
        Random r = new Random(7);
        int rows = 40;
        int vocab = 301;
        float[] logits = coarseLogits(r, rows, vocab);
        int[] picks = be.argmax(be.upload(logits, rows, vocab));
        for (int i = 0; i < rows; i++) {
            float[] row = Arrays.copyOfRange(logits, i * vocab, (i + 1) * vocab);
            assertEquals(Sampler.argmax(row), picks[i], "row " + i);
            for (int j = 0; j < picks[i]; j++) {
                assertEquals(true, row[j] < row[picks[i]], "row " + i + ": an earlier index holds the maximum");
            }
        }
    }

    @Test
    void sampleIsSamplersPickForTheSameDraw() {
        Random r = new Random(11);
        for (int vocab : new int[] {1, 2, 17, 1000, 5003}) {
            int rows = 64;
            float[] logits = r.nextBoolean() ? coarseLogits(r, rows, vocab) : normal(r, rows * vocab, 3);
            double[] temperature = new double[rows];
            int[] topK = new int[rows];
            double[] topP = new double[rows];
            double[] uniform = new double[rows];
            int[] expected = new int[rows];
            for (int i = 0; i < rows; i++) {
                temperature[i] = TEMPERATURES[r.nextInt(TEMPERATURES.length)];
                topK[i] = topK(r, vocab);
                topP[i] = TOP_PS[r.nextInt(TOP_PS.length)];
                RandomSource rng = RandomSource.seeded(r.nextLong());
                uniform[i] = rng.copy().nextDouble();
                SamplingParams params = new SamplingParams(temperature[i], topP[i], topK[i], null, 1, null, false);
                expected[i] = sampler.sample(Arrays.copyOfRange(logits, i * vocab, (i + 1) * vocab), params, rng);
            }
            assertArrayEquals(expected, be.sample(be.upload(logits, rows, vocab), temperature, topK, topP, uniform),
                    "V=" + vocab);
        }
    }

    @Test
    void theDrawWalksTheCumulativeDistribution() {
        // temperature 1 over logits log(1), log(2), log(3), log(4): probabilities 0.1, 0.2, 0.3, 0.4
        float[] logits = {0f, (float) Math.log(2), (float) Math.log(3), (float) Math.log(4)};
        Tensor t = be.upload(logits, 1, 4);
        double[] one = {1.0};
        int[] noK = {0};
        double[][] draws = {{0.0, 0}, {0.09, 0}, {0.11, 1}, {0.29, 1}, {0.31, 2}, {0.59, 2}, {0.61, 3}, {0.999, 3}};
        for (double[] d : draws) {
            assertEquals((int) d[1], be.sample(t, one, noK, one, new double[] {d[0]})[0], "u=" + d[0]);
        }
        // top-k 2 keeps tokens 2 and 3 (3/7, 4/7); top-p 0.5 keeps 3 (0.4) and 2 (mass before it
        // 0.4 < 0.5), top-p 0.35 only 3
        assertEquals(2, be.sample(t, one, new int[] {2}, one, new double[] {0.42})[0]);
        assertEquals(3, be.sample(t, one, new int[] {2}, one, new double[] {0.43})[0]);
        assertEquals(2, be.sample(t, one, noK, new double[] {0.5}, new double[] {0.42})[0]);
        assertEquals(3, be.sample(t, one, noK, new double[] {0.35}, new double[] {0.0})[0]);
        // greedy ignores the draw
        assertEquals(3, be.sample(t, new double[] {0.0}, noK, one, new double[] {0.0})[0]);
    }

    @Test
    void rejectsBadRowsAndParameters() {
        Tensor nan = be.upload(new float[] {0f, Float.NaN}, 1, 2);
        Tensor masked = be.upload(new float[] {Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY}, 1, 2);
        Tensor ok = be.upload(new float[] {0f, 1f}, 1, 2);
        int[] noK = {0};
        double[] one = {1.0};
        assertThrows(IllegalArgumentException.class, () -> be.argmax(nan));
        assertThrows(IllegalArgumentException.class, () -> be.argmax(masked));
        assertThrows(IllegalArgumentException.class, () -> be.sample(nan, one, noK, one, new double[] {0.5}));
        assertThrows(IllegalArgumentException.class, () -> be.sample(ok, one, noK, one, new double[] {1.0}));
        assertThrows(IllegalArgumentException.class, () -> be.sample(ok, one, noK, new double[] {0.0}, one));
        assertThrows(IllegalArgumentException.class, () -> be.sample(ok, new double[] {-1}, noK, one, one));
        assertThrows(IllegalArgumentException.class, () -> be.sample(ok, one, new int[] {-2}, one, one));
        assertThrows(IllegalArgumentException.class, () -> be.sample(ok, one, noK, one, new double[0]));
    }

    static final double[] TEMPERATURES = {0.0, 1e-6, 0.05, 0.3, 0.7, 1.0, 1.5};
    static final double[] TOP_PS = {1.0, 1.0, 0.95, 0.8, 0.5, 0.1, 1e-4};

    static int topK(Random r, int vocab) {
        return switch (r.nextInt(6)) {
            case 0 -> -1;
            case 1 -> 0;
            case 2 -> 1 + r.nextInt(Math.min(vocab, 50));
            case 3 -> Math.max(1, vocab - 1);
            case 4 -> vocab;
            default -> 1 + r.nextInt(vocab);
        };
    }

    /** Rows of logits on a coarse grid (many equal values), some masked to −inf, each with a finite one. */
    static float[] coarseLogits(Random r, int rows, int vocab) {
        float[] a = new float[rows * vocab];
        for (int i = 0; i < a.length; i++) {
            a[i] = r.nextInt(20) == 0 ? Float.NEGATIVE_INFINITY : r.nextInt(9) * 0.5f - 2f;
        }
        for (int i = 0; i < rows; i++) {
            a[i * vocab + r.nextInt(vocab)] = r.nextInt(9) * 0.5f - 2f;
        }
        return a;
    }

    static float[] normal(Random r, int n, double scale) {
        return TestData.normal(r, n, scale);
    }
}
