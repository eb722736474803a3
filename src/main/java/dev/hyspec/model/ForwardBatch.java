package dev.hyspec.model;

import java.util.List;

/**
 * The rows of one forward pass, flattened: row {@code r} occupies token rows
 * {@code offset(r) … offset(r)+length−1} of every activation (vLLM's {@code query_start_loc}).
 * Rows of prefill chunks, plain decodes and verifies with drafts mix freely.
 */
public final class ForwardBatch {
    private final List<BatchRow> rows;
    private final int[] offsets;
    private final int[] tokens;
    private final int[] positions;

    public ForwardBatch(List<BatchRow> rows) {
        if (rows.isEmpty()) {
            throw new IllegalArgumentException("a forward batch needs at least one row");
        }
        this.rows = List.copyOf(rows);
        this.offsets = new int[rows.size() + 1];
        for (int r = 0; r < rows.size(); r++) {
            offsets[r + 1] = offsets[r] + rows.get(r).length();
        }
        this.tokens = new int[offsets[rows.size()]];
        this.positions = new int[tokens.length];
        for (int r = 0; r < rows.size(); r++) {
            BatchRow row = rows.get(r);
            for (int t = 0; t < row.length(); t++) {
                tokens[offsets[r] + t] = row.tokens()[t];
                positions[offsets[r] + t] = row.start() + t;
            }
        }
    }

    public List<BatchRow> rows() {
        return rows;
    }

    public BatchRow row(int r) {
        return rows.get(r);
    }

    public int size() {
        return rows.size();
    }

    /** First token row of row {@code r}. */
    public int offset(int r) {
        return offsets[r];
    }

    public int totalTokens() {
        return tokens.length;
    }

    public int[] tokens() {
        return tokens;
    }

    /** Position of every token row. */
    public int[] positions() {
        return positions;
    }
}
