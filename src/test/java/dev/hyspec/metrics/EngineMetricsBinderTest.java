package dev.hyspec.metrics;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.engine.Engine;
import dev.hyspec.engine.ModelRegistry;
import dev.hyspec.engine.EngineMetrics;
import dev.hyspec.engine.FinishReason;
import dev.hyspec.engine.GenerationRequest;
import dev.hyspec.engine.TokenEvent;
import dev.hyspec.sampling.SamplingParams;
import dev.hyspec.spec.ScriptedDrafter;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * The engine meters at {@code /q/metrics}: generations through the engine bean move the step,
 * batch, draft, acceptance and commit meters of the strategy that served them, by exactly what the
 * engine's own counters say; gauges follow the engine's snapshot; no tag carries a request id.
 */
@QuarkusTest
class EngineMetricsBinderTest {
    private static final List<String> STRATEGIES = List.of("replay", "intermediate-copy");
    private static final Set<String> BOUNDED_TAGS = Set.of("model", "strategy", "outcome", "position", "le");
    private static final int DRAFTS = 4;

    @Inject
    ModelRegistry registry;

    @Inject
    Engine engine;

    @Inject
    EngineMetricsBinder binder;

    @Test
    void bothStrategiesHaveTheirSeriesFromTheStart() {
        given().accept("text/plain").get("/q/metrics").then().statusCode(200)
                .body(containsString("# TYPE hyspec_step_seconds histogram"))
                .body(containsString("# TYPE hyspec_spec_draft_tokens_total counter"));
        Exposition e = Exposition.scrape();
        for (String s : STRATEGIES) {
            for (String name : List.of("hyspec_spec_draft_tokens_total", "hyspec_spec_accepted_tokens_total",
                    "hyspec_spec_acceptance_rate", "hyspec_rollback_commit_seconds_count")) {
                assertEquals(1, e.find(name, "model", model(), "strategy", s).size(), name + " " + s);
            }
            assertEquals(17, e.find("hyspec_spec_position_drafted_total", "model", model(), "strategy", s).size());
            assertEquals(1, e.find("hyspec_spec_position_accepted_total", "strategy", s, "position", "17+").size());
        }
    }

    @Test
    void generationsMoveTheEngineMetersOfTheirStrategy() {
        EngineMetrics engineBefore = engine.metrics().orElseThrow();
        Exposition before = Exposition.scrape();
        List<String> ids = new ArrayList<>();
        for (String strategy : STRATEGIES) {
            int[] prompt = repetitivePrompt(strategy.length());
            String ngram = "metrics-ngram-" + UUID.randomUUID();
            List<Integer> reference = tokens(run(GenerationRequest.of(ngram, prompt, greedy(20))
                    .withStrategy(strategy)));
            // the n-gram drafter may guess wrong on a random model: a scripted one guarantees accepted drafts
            String scripted = "metrics-scripted-" + UUID.randomUUID();
            ScriptedDrafter drafter = ScriptedDrafter.forcingAcceptance(
                    reference.stream().mapToInt(Integer::intValue).toArray(), prompt.length, step -> step % 3 + 1,
                    DRAFTS, registry.model().orElseThrow().model().config().vocabSize());
            assertEquals(reference, tokens(run(GenerationRequest.of(scripted, prompt, greedy(20))
                    .withStrategy(strategy).withDrafter(drafter, DRAFTS))));
            ids.add(ngram);
            ids.add(scripted);
        }
        // a query runs on the engine thread after the last step has finished, observer calls included
        EngineMetrics engineAfter = engine.metrics().orElseThrow();
        Exposition after = Exposition.scrape();

        double steps = engineAfter.steps - engineBefore.steps;
        assertTrue(steps > 0);
        assertEquals(steps, delta(before, after, "hyspec_step_seconds_count", "model", model()));
        assertEquals(steps, delta(before, after, "hyspec_batch_size_count", "model", model()));
        assertTrue(delta(before, after, "hyspec_batch_size_sum") >= steps);
        assertTrue(delta(before, after, "hyspec_batch_tokens_sum") > steps, "prefill and drafts add tokens");
        assertTrue(delta(before, after, "hyspec_step_seconds_sum") > 0);
        assertEquals(steps, delta(before, after, "hyspec_step_seconds_bucket", "le", "+Inf"));

        for (String s : STRATEGIES) {
            EngineMetrics.StrategyStats was = engineBefore.strategies.getOrDefault(s, new EngineMetrics.StrategyStats());
            EngineMetrics.StrategyStats is = engineAfter.strategies.get(s);
            String[] tags = {"model", model(), "strategy", s};
            double drafted = delta(before, after, "hyspec_spec_draft_tokens_total", tags);
            double accepted = delta(before, after, "hyspec_spec_accepted_tokens_total", tags);
            assertEquals(is.draftTokens - was.draftTokens, drafted, s);
            assertEquals(is.acceptedDraftTokens - was.acceptedDraftTokens, accepted, s);
            assertTrue(accepted > 0 && drafted > accepted, s + ": some drafts accepted, some rejected");
            assertEquals(drafted, delta(before, after, "hyspec_spec_position_drafted_total", tags), s);
            assertEquals(accepted, delta(before, after, "hyspec_spec_position_accepted_total", tags), s);
            for (int p = 1; p < DRAFTS; p++) {
                assertTrue(positionDelta(before, after, "drafted", s, p) >= positionDelta(before, after, "drafted", s, p + 1));
                assertTrue(positionDelta(before, after, "accepted", s, p) >= positionDelta(before, after, "accepted", s, p + 1));
            }
            assertTrue(positionDelta(before, after, "accepted", s, 1) > 0, s);
            assertEquals(0.0, positionDelta(before, after, "drafted", s, DRAFTS + 1), s);
            assertEquals(is.generateRows - was.generateRows,
                    delta(before, after, "hyspec_rollback_commit_seconds_count", tags), s);
        }
        for (String id : ids) {
            assertFalse(after.text.contains(id), "a request id in the metrics: " + id);
        }
        for (Exposition.Sample sample : after.samples) {
            if (sample.name().startsWith("hyspec_")) {
                assertTrue(BOUNDED_TAGS.containsAll(sample.labels().keySet()), sample.toString());
            }
        }
    }

    @Test
    void gaugesFollowTheEngineSnapshot() throws InterruptedException {
        run(GenerationRequest.of("metrics-gauges", repetitivePrompt(3), greedy(8)));
        EngineMetrics now = engine.metrics().orElseThrow();
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (engine.lastMetrics().map(m -> m.steps).orElse(-1L) < now.steps && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        EngineMetrics m = engine.lastMetrics().orElseThrow();
        assertEquals(now.steps, m.steps, "the snapshot refreshes within a few loops");
        Exposition e = Exposition.scrape();
        assertEquals(m.slotsTotal, e.value("hyspec_state_pool_slots_total", "model", model()));
        assertEquals(m.slotsUsed, e.value("hyspec_state_pool_slots_used", "model", model()));
        assertEquals(m.stateBytes, e.value("hyspec_state_pool_bytes", "model", model()));
        assertEquals(m.kvPagesTotal, e.value("hyspec_kv_cache_pages_total", "model", model()));
        assertEquals(m.kvPagesUsed, e.value("hyspec_kv_cache_pages_used", "model", model()));
        assertEquals(0.0, e.value("hyspec_queue_length", "model", model()));
        assertEquals(0.0, e.value("hyspec_running_requests", "model", model()));
        assertTrue(m.slotsTotal > 0 && m.kvPagesTotal > 0 && m.stateBytes > 0);
        assertTrue(m.prefixQueries > 0, "every admitted request looks its prompt up");
        assertEquals(m.prefixQueries, e.value("hyspec_prefix_cache_queries_total", "model", model()));
        assertEquals(m.prefixHits, e.value("hyspec_prefix_cache_hits_total", "model", model()));
        assertEquals(m.prefixQueriedTokens, e.value("hyspec_prefix_cache_queried_tokens_total", "model", model()));
        assertEquals(m.prefixHitTokens, e.value("hyspec_prefix_cache_hit_tokens_total", "model", model()));
        assertEquals(m.preemptions, e.value("hyspec_preemptions_total", "model", model()));
        assertEquals(m.layoutConversions, e.value("hyspec_layout_conversions_total", "model", model()));
        for (String s : STRATEGIES) {
            EngineMetrics.StrategyStats st = m.strategies.get(s);
            double rate = st == null ? 0 : st.acceptanceRate();
            assertEquals(rate, e.value("hyspec_spec_acceptance_rate", "model", model(), "strategy", s), 1e-9, s);
        }
    }

    @Test
    void positionsBeyondSixteenShareOneTag() {
        Exposition before = Exposition.scrape();
        binder.onVerified("replay", 20, 18, 1_000);
        Exposition after = Exposition.scrape();
        for (int p = 1; p <= 16; p++) {
            assertEquals(1.0, positionDelta(before, after, "drafted", "replay", p), "position " + p);
            assertEquals(1.0, positionDelta(before, after, "accepted", "replay", p), "position " + p);
        }
        String[] lumped = {"strategy", "replay", "position", "17+"};
        assertEquals(4.0, delta(before, after, "hyspec_spec_position_drafted_total", lumped));
        assertEquals(2.0, delta(before, after, "hyspec_spec_position_accepted_total", lumped));
        assertEquals(20.0, delta(before, after, "hyspec_spec_draft_tokens_total", "strategy", "replay"));
        assertEquals(18.0, delta(before, after, "hyspec_spec_accepted_tokens_total", "strategy", "replay"));
        assertEquals(1.0, delta(before, after, "hyspec_rollback_commit_seconds_count", "strategy", "replay"));
        assertEquals(1.0, delta(before, after, "hyspec_rollback_commit_seconds_bucket", "strategy", "replay",
                "le", "1.0E-5"));
        assertEquals(0.0, delta(before, after, "hyspec_spec_draft_tokens_total", "strategy", "intermediate-copy"));
    }

    private List<TokenEvent> run(GenerationRequest r) {
        List<TokenEvent> events = engine.generate(r).collect().asList().await().atMost(Duration.ofSeconds(120));
        assertEquals(FinishReason.LENGTH, events.get(events.size() - 1).finishReason(), r.id());
        return events;
    }

    private static List<Integer> tokens(List<TokenEvent> events) {
        List<Integer> out = new ArrayList<>();
        for (TokenEvent e : events) {
            for (int t : e.tokens()) {
                out.add(t);
            }
        }
        return out;
    }

    /** A 5-token motif repeated six times: the n-gram drafter finds matches to propose. */
    private static int[] repetitivePrompt(int seed) {
        int[] motif = {17 + seed, 101, 230 + seed, 44, 399};
        int[] p = new int[30];
        for (int i = 0; i < p.length; i++) {
            p[i] = motif[i % motif.length];
        }
        return p;
    }

    private static SamplingParams greedy(int maxTokens) {
        return new SamplingParams(0.0, 1.0, 0, null, maxTokens, List.of(), true);
    }

    private static double delta(Exposition before, Exposition after, String name, String... labels) {
        return after.sum(name, labels) - before.sum(name, labels);
    }

    private double positionDelta(Exposition before, Exposition after, String kind, String strategy, int p) {
        return delta(before, after, "hyspec_spec_position_" + kind + "_total", "model", model(), "strategy", strategy,
                "position", p > 16 ? "17+" : Integer.toString(p));
    }

    /** The served model's id: the tag every hyspec meter carries. */
    private String model() {
        return registry.model().orElseThrow().id();
    }
}
