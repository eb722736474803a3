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
    private final int tokensPerRow;
    private final int[] lengths;
    private final int[] starts;
    private final int[][] blockTables;

    public ForwardBatch(List<BatchRow> rows) {
        this(rows, 0, rows.stream().mapToInt(BatchRow::length).toArray());
    }

    private ForwardBatch(List<BatchRow> rows, int tokensPerRow, int[] lengths) {
        if (rows.isEmpty()) {
            throw new IllegalArgumentException("a forward batch needs at least one row");
        }
        this.tokensPerRow = tokensPerRow;
        this.lengths = lengths;
        this.rows = List.copyOf(rows);
        this.starts = rows.stream().mapToInt(BatchRow::start).toArray();
        this.blockTables = rows.stream().map(BatchRow::blockTable).toArray(int[][]::new);
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

    /**
     * The generate rows of a step in uniform form, as batched kernels and captured graphs take them:
     * every row padded to {@code T} = the longest row's length (the extra tokens repeat the row's
     * last token; nothing accepts them), then {@code paddedRows − R} padding rows of {@code T} tokens
     * on {@code paddingSlot} with no KV pages and no logits (DESIGN I6). Logits stay those of the
     * real rows, in order.
     */
    public static ForwardBatch uniform(List<BatchRow> generate, int paddedRows, int paddingSlot) {
        if (generate.isEmpty() || paddedRows < generate.size()) {
            throw new IllegalArgumentException(generate.size() + " rows cannot be padded to " + paddedRows);
        }
        int tokensPerRow = 0;
        for (BatchRow row : generate) {
            if (row.mode() != RowMode.GENERATE) {
                throw new IllegalArgumentException("only generate rows have a uniform form");
            }
            tokensPerRow = Math.max(tokensPerRow, row.length());
        }
        List<BatchRow> padded = new java.util.ArrayList<>(paddedRows);
        int[] lengths = new int[paddedRows];
        for (int r = 0; r < generate.size(); r++) {
            BatchRow row = generate.get(r);
            int[] tokens = java.util.Arrays.copyOf(row.tokens(), tokensPerRow);
            java.util.Arrays.fill(tokens, row.length(), tokensPerRow, row.tokens()[row.length() - 1]);
            padded.add(new BatchRow(row.slot(), tokens, row.start(), row.mode(), row.strategy(), row.blockTable(),
                    row.logits()));
            lengths[r] = row.length();
        }
        BatchRow first = generate.get(0);
        for (int r = generate.size(); r < paddedRows; r++) {
            padded.add(new BatchRow(paddingSlot, new int[tokensPerRow], 0, RowMode.GENERATE, first.strategy(),
                    new int[0], BatchRow.Logits.NONE));
        }
        return new ForwardBatch(padded, tokensPerRow, lengths);
    }

    /** {@code T} of a uniform batch (every row owns {@code T} token rows), 0 for a ragged one. */
    public int tokensPerRow() {
        return tokensPerRow;
    }

    /** How many of row {@code r}'s tokens are real (the rest are padding; 0 for a padding row). */
    public int length(int r) {
        return lengths[r];
    }

    /** {@link #length} of every row. Not to be modified. */
    public int[] lengths() {
        return lengths;
    }

    /** Every row's first position ({@link BatchRow#start}). Not to be modified. */
    public int[] starts() {
        return starts;
    }

    /** Every row's KV pages ({@link BatchRow#blockTable}). Not to be modified. */
    public int[][] blockTables() {
        return blockTables;
    }

    /**
     * The token rows the LM head runs on, row after row: the last {@link BatchRow#logitRows()} real
     * tokens of each row.
     */
    public int[] logitTokenRows() {
        int n = 0;
        for (int r = 0; r < rows.size(); r++) {
            n += logitRows(r);
        }
        int[] out = new int[n];
        int at = 0;
        for (int r = 0; r < rows.size(); r++) {
            int k = logitRows(r);
            for (int i = 0; i < k; i++) {
                out[at++] = offsets[r] + lengths[r] - k + i;
            }
        }
        return out;
    }

    private int logitRows(int r) {
        return Math.min(rows.get(r).logitRows(), lengths[r]);
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
