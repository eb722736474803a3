package dev.hyspec.metrics;

import java.time.Duration;

/**
 * Histogram bucket bounds of hyspec's timers and summaries. Explicit bounds (rather than
 * Micrometer's generic percentile histogram of ~70 buckets) keep the series count low while
 * spanning what LLM serving sees: a GPU step of a few milliseconds up to a CPU step of seconds,
 * a first token in milliseconds up to minutes behind a long queue. The latency bounds follow vLLM's,
 * so dashboards written for it read the same.
 */
final class Buckets {
    /** One engine step (schedule, forward, verify, commit). */
    static final Duration[] STEP = seconds(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10);

    /** One rollback commit: a state copy or a short replay, microseconds to milliseconds. */
    static final Duration[] COMMIT = seconds(0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
            0.005, 0.01, 0.025, 0.05, 0.1);

    static final Duration[] TIME_TO_FIRST_TOKEN = seconds(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25,
            0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560);

    static final Duration[] INTER_TOKEN = seconds(0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
            0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80);

    static final Duration[] E2E = seconds(0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240,
            480, 960, 1920, 7680);

    /** Rows per step: up to a few hundred (max-num-seqs plus prefill chunks). */
    static final double[] BATCH_ROWS = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

    /** Tokens per step: up to max-num-batched-tokens, 512 by default. */
    static final double[] BATCH_TOKENS = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

    private Buckets() {}

    private static Duration[] seconds(double... bounds) {
        Duration[] out = new Duration[bounds.length];
        for (int i = 0; i < bounds.length; i++) {
            out[i] = Duration.ofNanos(Math.round(bounds[i] * 1e9));
        }
        return out;
    }
}
