package dev.hyspec.engine;

/**
 * Hooks the engine calls on its own thread as it works (metrics). Implementations must be cheap and
 * must not block or throw.
 */
public interface EngineObserver {
    /**
     * One step ran: its wall time (schedule, forward, verify, commit), its rows and tokens.
     *
     * @param generateRows decode and verify rows
     * @param prefillRows  prefill chunks
     */
    default void onStep(long nanos, int generateRows, int prefillRows, int tokens) {}

    /**
     * One generate row was verified and committed through {@code strategy}: {@code drafts} drafts
     * proposed, the first {@code accepted} of them accepted (so draft positions {@code 1…accepted}
     * were accepted), and the commit (the rollback of the rejected suffix) took {@code commitNanos}.
     */
    default void onVerified(String strategy, int drafts, int accepted, long commitNanos) {}

    EngineObserver NONE = new EngineObserver() {};
}
