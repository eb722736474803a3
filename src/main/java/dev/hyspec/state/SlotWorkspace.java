package dev.hyspec.state;

/**
 * Buffers a rollback strategy keeps for one slot (scratch states, input history). The pool resets
 * them whenever the slot is handed out again, so a recycled slot never sees a previous owner's data.
 */
public interface SlotWorkspace {
    /** Zeroes every buffer and forgets any pending work. */
    void reset();

    /** True while the slot's state is not yet {@code S(L)} and needs the strategy to settle it. */
    boolean pending();

    /** Bytes held, for metrics. */
    long bytes();

    /** Releases the buffers. */
    void free();
}
