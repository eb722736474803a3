package dev.hyspec.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The per-row metadata the batched attention kernels read (host side only: runs without a GPU). */
class AttentionRowsMetaTest {

    @Test
    void tablesArePaddedToAPowerOfTwoOfAtLeastEight() {
        assertEquals(8, AttentionKernels.tableBucket(0));
        assertEquals(8, AttentionKernels.tableBucket(1));
        assertEquals(8, AttentionKernels.tableBucket(8));
        assertEquals(16, AttentionKernels.tableBucket(9));
        assertEquals(16, AttentionKernels.tableBucket(16));
        assertEquals(128, AttentionKernels.tableBucket(94));
    }

    @Test
    void metaHoldsStartsLengthsAndPaddedTables() {
        int[][] tables = {{4, 2}, {}, {7}};
        AttentionKernels.RowsMeta m = AttentionKernels.rowsMeta(tables, 16, new int[] {20, 0, 3},
                new int[] {4, 0, 2}, 4, 8 * 16);
        assertEquals(8, m.tableWidth());
        int[] want = new int[3 * (2 + 8)];
        int[] head = {20, 0, 3, 4, 0, 2};
        System.arraycopy(head, 0, want, 0, head.length);
        want[6] = 4;
        want[7] = 2;
        want[6 + 16] = 7;
        assertArrayEquals(want, m.meta());
    }

    @Test
    void rejectsRowsTheirTablesDoNotCover() {
        // row 0 needs positions 0 … 16: two pages
        assertThrows(IndexOutOfBoundsException.class, () -> AttentionKernels.rowsMeta(new int[][] {{0}}, 16,
                new int[] {15}, new int[] {2}, 4, 4 * 16));
        // a page outside the cache
        assertThrows(IndexOutOfBoundsException.class, () -> AttentionKernels.rowsMeta(new int[][] {{4}}, 16,
                new int[] {0}, new int[] {1}, 1, 4 * 16));
        // a length past T, and mismatched per-row arrays
        assertThrows(IllegalArgumentException.class, () -> AttentionKernels.rowsMeta(new int[][] {{0}}, 16,
                new int[] {0}, new int[] {5}, 4, 4 * 16));
        assertThrows(IllegalArgumentException.class, () -> AttentionKernels.rowsMeta(new int[][] {{0}, {1}}, 16,
                new int[] {0}, new int[] {1}, 4, 4 * 16));
    }
}
