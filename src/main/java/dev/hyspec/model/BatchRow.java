package dev.hyspec.model;

import dev.hyspec.state.RollbackStrategy;

/**
 * One sequence's part of a forward batch: {@code tokens} at positions {@code start … start+T−1}.
 *
 * @param slot        the sequence's slot in the state pool (unused when the model has no recurrent layer)
 * @param blockTable  the sequence's KV pages, covering at least {@code start + T} positions
 * @param strategy    the rollback strategy of a {@code GENERATE} row (null for prefill)
 * @param logits      which positions need logits
 */
public record BatchRow(int slot, int[] tokens, int start, RowMode mode, RollbackStrategy strategy, int[] blockTable,
                       Logits logits) {

    /** Which positions of a row the LM head runs on. */
    public enum Logits {
        NONE,
        LAST,
        ALL
    }

    public BatchRow {
        if (tokens.length == 0) {
            throw new IllegalArgumentException("a batch row needs at least one token");
        }
        if (mode == RowMode.GENERATE && strategy == null) {
            throw new IllegalArgumentException("a generate row needs a rollback strategy");
        }
    }

    public int length() {
        return tokens.length;
    }

    public int logitRows() {
        return switch (logits) {
            case NONE -> 0;
            case LAST -> 1;
            case ALL -> tokens.length;
        };
    }
}
