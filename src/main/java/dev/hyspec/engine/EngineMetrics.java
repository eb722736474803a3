package dev.hyspec.engine;

import java.util.Map;
import java.util.TreeMap;

/**
 * Counters the engine keeps while it runs; read through {@link EngineCore#metrics()} (a copy).
 * Everything that can differ between rollback strategies is kept per strategy.
 */
public final class EngineMetrics {
    /** Per rollback strategy. */
    public static final class StrategyStats {
        public long requests;
        public long generateRows;
        public long draftTokens;
        public long acceptedDraftTokens;
        public long outputTokens;
        /** Forward time attributed to this strategy's generate rows (by their share of the batch's tokens), plus commit. */
        public long generateNanos;

        StrategyStats copy() {
            StrategyStats s = new StrategyStats();
            s.requests = requests;
            s.generateRows = generateRows;
            s.draftTokens = draftTokens;
            s.acceptedDraftTokens = acceptedDraftTokens;
            s.outputTokens = outputTokens;
            s.generateNanos = generateNanos;
            return s;
        }

        /** Accepted drafts over proposed drafts (0 when none were proposed). */
        public double acceptanceRate() {
            return draftTokens == 0 ? 0 : (double) acceptedDraftTokens / draftTokens;
        }
    }

    public long steps;
    public long promptTokens;
    public long prefillTokens;
    public long preemptions;
    public long finished;
    public long aborted;
    public long errors;
    public long prefixQueries;
    public long prefixQueriedTokens;
    public long prefixHits;
    public long prefixHitTokens;
    public long prefixEvictions;
    public int prefixBlocks;
    public int prefixCheckpoints;
    public int running;
    public int waiting;
    public int slotsUsed;
    public int slotsTotal;
    public long stateBytes;
    public int kvPagesUsed;
    public int kvPagesTotal;
    public long layoutConversions;
    public final Map<String, StrategyStats> strategies = new TreeMap<>();

    StrategyStats strategy(String id) {
        return strategies.computeIfAbsent(id, k -> new StrategyStats());
    }

    EngineMetrics copy() {
        EngineMetrics m = new EngineMetrics();
        m.steps = steps;
        m.promptTokens = promptTokens;
        m.prefillTokens = prefillTokens;
        m.preemptions = preemptions;
        m.finished = finished;
        m.aborted = aborted;
        m.errors = errors;
        m.prefixQueries = prefixQueries;
        m.prefixQueriedTokens = prefixQueriedTokens;
        m.prefixHits = prefixHits;
        m.prefixHitTokens = prefixHitTokens;
        m.prefixEvictions = prefixEvictions;
        m.prefixBlocks = prefixBlocks;
        m.prefixCheckpoints = prefixCheckpoints;
        m.running = running;
        m.waiting = waiting;
        m.slotsUsed = slotsUsed;
        m.slotsTotal = slotsTotal;
        m.stateBytes = stateBytes;
        m.kvPagesUsed = kvPagesUsed;
        m.kvPagesTotal = kvPagesTotal;
        m.layoutConversions = layoutConversions;
        strategies.forEach((k, v) -> m.strategies.put(k, v.copy()));
        return m;
    }
}
