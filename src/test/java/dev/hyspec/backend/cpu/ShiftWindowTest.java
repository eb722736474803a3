package dev.hyspec.backend.cpu;

import static dev.hyspec.backend.cpu.TestData.assertClose;
import static dev.hyspec.backend.cpu.TestData.normal;
import static dev.hyspec.backend.cpu.TestData.rows;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.hyspec.backend.Tensor;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** {@link CpuBackend#shiftWindow} and the window handling of {@link CpuBackend#causalConv1d}. */
class ShiftWindowTest {
    private static final int C = 5;
    private static final int W = 4;
    private static final int KEEP = W - 1;
    private static final int T = 7;

    private final CpuBackend be = new CpuBackend();

    /** The last W−1 columns of [window | x[0..count)ᵀ], per channel, as a plain loop. */
    private static float[] expectedWindow(float[] window, float[] x, int count) {
        float[] out = new float[C * KEEP];
        for (int c = 0; c < C; c++) {
            float[] u = new float[KEEP + count];
            for (int i = 0; i < KEEP; i++) {
                u[i] = window[c * KEEP + i];
            }
            for (int t = 0; t < count; t++) {
                u[KEEP + t] = x[t * C + c];
            }
            for (int i = 0; i < KEEP; i++) {
                out[c * KEEP + i] = u[count + i];
            }
        }
        return out;
    }

    @Test
    void shiftWindowKeepsTheLastInputsForEveryCount() {
        Random r = new Random(31);
        float[] window = normal(r, C * KEEP, 1);
        float[] x = normal(r, T * C, 1);
        for (int count = 0; count <= T; count++) {
            Tensor win = be.upload(window, C, KEEP);
            be.shiftWindow(win, be.upload(x, T, C), count);
            assertArrayEquals(expectedWindow(window, x, count), be.download(win), "count " + count);
        }
    }

    @Test
    void shiftWindowMatchesAnAdvancingConv() {
        Random r = new Random(32);
        float[] window = normal(r, C * KEEP, 1);
        float[] x = normal(r, T * C, 1);
        Tensor w = be.upload(normal(r, C * W, 0.5), C, W);
        Tensor bias = be.upload(normal(r, C, 0.5), C);
        for (int count = 1; count <= T; count++) {
            Tensor shifted = be.upload(window, C, KEEP);
            be.shiftWindow(shifted, be.upload(x, T, C), count);
            Tensor conv = be.upload(window, C, KEEP);
            be.causalConv1d(be.upload(rows(x, C, 0, count), count, C), conv, w, bias, be.zeros(count, C), true);
            assertArrayEquals(be.download(conv), be.download(shifted), "count " + count);
        }
    }

    @Test
    void convWithoutAdvanceLeavesTheWindowAndGivesTheSameOutput() {
        Random r = new Random(33);
        float[] window = normal(r, C * KEEP, 1);
        Tensor x = be.upload(normal(r, T * C, 1), T, C);
        Tensor w = be.upload(normal(r, C * W, 0.5), C, W);
        Tensor bias = be.upload(normal(r, C, 0.5), C);
        Tensor fixed = be.upload(window, C, KEEP);
        Tensor outFixed = be.zeros(T, C);
        be.causalConv1d(x, fixed, w, bias, outFixed, false);
        assertArrayEquals(window, be.download(fixed), "advance=false leaves the window");
        Tensor moving = be.upload(window, C, KEEP);
        Tensor outMoving = be.zeros(T, C);
        be.causalConv1d(x, moving, w, bias, outMoving, true);
        assertClose("out", be.download(outMoving), be.download(outFixed), 0);
        assertArrayEquals(expectedWindow(window, be.download(x), T), be.download(moving), "advance=true");
    }
}
