package dev.hyspec.metrics;

import dev.hyspec.engine.LoadedModel;
import dev.hyspec.engine.ModelRegistry;

/**
 * The tag keys hyspec's meters use. Every one has a bounded set of values (a model id, a strategy
 * id, a finish reason, a draft position up to {@link #MAX_POSITION}); request ids never become
 * tags, as each would open a new time series.
 */
final class MetricTags {
    static final String MODEL = "model";
    static final String STRATEGY = "strategy";
    static final String OUTCOME = "outcome";
    static final String POSITION = "position";

    /** Strategy tag of a request refused before a strategy was chosen. */
    static final String NO_STRATEGY = "none";
    /** Stands in for a value outside the known set, so a caller's mistake cannot add series without bound. */
    static final String OTHER = "other";

    /** Draft positions beyond this one share the tag {@code "17+"}. */
    static final int MAX_POSITION = 16;

    private MetricTags() {}

    /** The served model's id, or {@code "none"} while none is loaded. */
    static String model(ModelRegistry registry) {
        return registry.model().map(LoadedModel::id).orElse("none");
    }

    /** Position tags {@code "1"…"16"} then {@code "17+"}: index {@code p - 1} for draft position {@code p}. */
    static String[] positions() {
        String[] out = new String[MAX_POSITION + 1];
        for (int p = 1; p <= MAX_POSITION; p++) {
            out[p - 1] = Integer.toString(p);
        }
        out[MAX_POSITION] = (MAX_POSITION + 1) + "+";
        return out;
    }
}
