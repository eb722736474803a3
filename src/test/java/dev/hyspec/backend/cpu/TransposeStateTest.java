package dev.hyspec.backend.cpu;

import static dev.hyspec.backend.cpu.TestData.normal;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.hyspec.backend.Tensor;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** {@link CpuBackend#transposeState}: per head [rows, cols] → [cols, rows], in place. */
class TransposeStateTest {
    private final CpuBackend be = new CpuBackend();

    @Test
    void transposesEachHeadAndRoundTrips() {
        Random r = new Random(41);
        int heads = 3;
        int rows = 4;
        int cols = 7;
        float[] s = normal(r, heads * rows * cols, 1);
        Tensor t = be.upload(s, heads, rows, cols);
        be.transposeState(t, heads, rows, cols);
        float[] expected = new float[s.length];
        for (int h = 0; h < heads; h++) {
            for (int i = 0; i < rows; i++) {
                for (int j = 0; j < cols; j++) {
                    expected[(h * cols + j) * rows + i] = s[(h * rows + i) * cols + j];
                }
            }
        }
        assertArrayEquals(expected, be.download(t));
        be.transposeState(t, heads, cols, rows);
        assertArrayEquals(s, be.download(t), "round trip");
    }
}
