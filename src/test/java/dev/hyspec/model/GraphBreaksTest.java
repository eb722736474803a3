package dev.hyspec.model;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Where a recorded step is cut into pieces ({@link HybridModel#breakAfter}): after the first block,
 * then after pieces four times as long as the one before, so the host records each piece while the
 * device runs the one before it.
 */
class GraphBreaksTest {
    @Test
    void piecesGrowFourfold() {
        List<Integer> breaks = new ArrayList<>();
        for (int blocks = 1; blocks <= 400; blocks++) {
            if (HybridModel.breakAfter(blocks)) {
                breaks.add(blocks);
            }
        }
        assertEquals(List.of(1, 5, 21, 85, 341), breaks);
    }
}
