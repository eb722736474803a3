package dev.hyspec.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.hyspec.engine.ModelRegistry;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The request-level meters the HTTP layer records appear at {@code /q/metrics} with their tags and buckets. */
@QuarkusTest
class RequestMetricsTest {
    @Inject
    ModelRegistry registry;

    @Inject
    RequestMetrics metrics;

    @Test
    void refusalsCountUnderStrategyNone() {
        Exposition before = Exposition.scrape();
        metrics.rejected("overloaded");
        metrics.rejected("overloaded");
        metrics.rejected("rejected");
        Exposition after = Exposition.scrape();
        assertEquals(2.0, delta(before, after, "hyspec_requests_total",
                "model", model(), "strategy", "none", "outcome", "overloaded"));
        assertEquals(1.0, delta(before, after, "hyspec_requests_total",
                "model", model(), "strategy", "none", "outcome", "rejected"));
    }

    @Test
    void latenciesLandInTheirBuckets() {
        Exposition before = Exposition.scrape();
        metrics.firstToken("replay", Duration.ofMillis(50).toNanos());
        metrics.interToken("intermediate-copy", Duration.ofMillis(20).toNanos());
        metrics.interToken("intermediate-copy", Duration.ofMillis(30).toNanos());
        Exposition after = Exposition.scrape();
        String[] replay = {"model", model(), "strategy", "replay"};
        assertEquals(1.0, delta(before, after, "hyspec_time_to_first_token_seconds_count", replay));
        assertEquals(0.05, delta(before, after, "hyspec_time_to_first_token_seconds_sum", replay), 1e-9);
        assertEquals(0.0, delta(before, after, "hyspec_time_to_first_token_seconds_bucket",
                "model", model(), "strategy", "replay", "le", "0.04"));
        assertEquals(1.0, delta(before, after, "hyspec_time_to_first_token_seconds_bucket",
                "model", model(), "strategy", "replay", "le", "0.06"));
        String[] copy = {"model", model(), "strategy", "intermediate-copy"};
        assertEquals(2.0, delta(before, after, "hyspec_inter_token_latency_seconds_count", copy));
        assertEquals(0.05, delta(before, after, "hyspec_inter_token_latency_seconds_sum", copy), 1e-9);
        assertEquals(1.0, delta(before, after, "hyspec_inter_token_latency_seconds_bucket",
                "model", model(), "strategy", "intermediate-copy", "le", "0.025"));
    }

    @Test
    void aFinishedRequestCountsItsOutcomeTokensAndLatency() {
        Exposition before = Exposition.scrape();
        metrics.finished("intermediate-copy", "length", 7, 20, Duration.ofSeconds(2).toNanos());
        metrics.finished("replay", "stop", 3, 1, Duration.ofMillis(400).toNanos());
        Exposition after = Exposition.scrape();
        String[] copy = {"model", model(), "strategy", "intermediate-copy"};
        assertEquals(1.0, delta(before, after, "hyspec_requests_total",
                "model", model(), "strategy", "intermediate-copy", "outcome", "length"));
        assertEquals(1.0, delta(before, after, "hyspec_requests_total",
                "model", model(), "strategy", "replay", "outcome", "stop"));
        assertEquals(7.0, delta(before, after, "hyspec_prompt_tokens_total", copy));
        assertEquals(20.0, delta(before, after, "hyspec_generation_tokens_total", copy));
        assertEquals(1.0, delta(before, after, "hyspec_e2e_request_latency_seconds_count", copy));
        assertEquals(2.0, delta(before, after, "hyspec_e2e_request_latency_seconds_sum", copy), 1e-9);
        assertEquals(1.0, delta(before, after, "hyspec_e2e_request_latency_seconds_bucket",
                "model", model(), "strategy", "replay", "le", "0.5"));
        assertEquals(10.0, delta(before, after, "hyspec_prompt_tokens_total", "model", model()));
    }

    @Test
    void unknownStrategiesAndOutcomesAreLumpedIntoOther() {
        Exposition before = Exposition.scrape();
        metrics.finished("request-1234", "tool_calls", 1, 1, 1_000_000);
        metrics.rejected("teapot");
        Exposition after = Exposition.scrape();
        assertEquals(1.0, delta(before, after, "hyspec_requests_total",
                "model", model(), "strategy", "other", "outcome", "other"));
        assertEquals(1.0, delta(before, after, "hyspec_requests_total",
                "model", model(), "strategy", "none", "outcome", "other"));
        assertEquals(-1, after.text.indexOf("request-1234"));
    }

    private static double delta(Exposition before, Exposition after, String name, String... labels) {
        return after.sum(name, labels) - before.sum(name, labels);
    }

    /** The served model's id: the tag every hyspec meter carries. */
    private String model() {
        return registry.model().orElseThrow().id();
    }
}
