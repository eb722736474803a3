package dev.hyspec.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.model.HybridModel;
import dev.hyspec.sampling.SamplingParams;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.ReplayStrategy;
import io.quarkus.test.junit.QuarkusTest;
import io.smallrye.mutiny.Multi;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The engine bean in the running application: the strategy beans are discovered by their
 * identifiers, requests stream their tokens through Mutiny from the engine thread, a cancelled
 * stream aborts its request and frees its slot and pages.
 */
@QuarkusTest
class EngineBeanTest {
    @Inject
    Engine engine;

    @Inject
    ModelRegistry registry;

    @Inject
    MambaStatePool pool;

    @Test
    void bothStrategyBeansAreDiscoveredByIdentifier() {
        assertEquals(Set.of(ReplayStrategy.ID, IntermediateCopyStrategy.ID), engine.strategies().keySet());
        assertTrue(engine.ready());
        assertNotNull(pool);
        assertEquals((int) engine.query(c -> c.options().stateSlots()), pool.capacity());
    }

    @Test
    void streamsTheSameTokensAsTheReferenceForEachStrategy() {
        HybridModel model = registry.model().orElseThrow().model();
        int[] prompt = EngineHarness.repetitivePrompt(11, 4, 5, model.config().vocabSize());
        int[] want = EngineHarness.referenceGreedy(model, prompt, 24);
        for (String strategy : List.of(ReplayStrategy.ID, IntermediateCopyStrategy.ID)) {
            GenerationRequest r = GenerationRequest.of("bean-" + strategy, prompt, EngineHarness.greedy(24))
                    .withStrategy(strategy);
            List<TokenEvent> events = engine.generate(r).collect().asList().await().atMost(Duration.ofSeconds(60));
            TokenEvent last = events.get(events.size() - 1);
            assertEquals(FinishReason.LENGTH, last.finishReason());
            List<Integer> got = new ArrayList<>();
            events.forEach(e -> {
                for (int t : e.tokens()) {
                    got.add(t);
                }
            });
            assertArrayEquals(want, got.stream().mapToInt(Integer::intValue).toArray(), strategy);
        }
    }

    @Test
    void cancellingTheStreamAbortsTheRequestAndFreesItsSlot() throws Exception {
        int baseline = engine.query(c -> c.store().pool().usedSlots() - c.metrics().prefixCheckpoints);
        int[] prompt = {5, 6, 7, 8, 9, 10};
        GenerationRequest r = GenerationRequest.of("bean-cancel", prompt,
                new SamplingParams(0.0, 1.0, 0, null, 3000, List.of(), true));
        CountDownLatch gotTokens = new CountDownLatch(2);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Multi<TokenEvent> stream = engine.generate(r);
        var cancellable = stream.subscribe().with(e -> gotTokens.countDown(), failure::set);
        assertTrue(gotTokens.await(60, TimeUnit.SECONDS), "tokens should arrive");
        cancellable.cancel();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (engine.query(c -> c.slotOf("bean-cancel")) >= 0 && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(-1, (int) engine.query(c -> c.slotOf("bean-cancel")), "the aborted request must hold no slot");
        assertEquals(baseline, (int) engine.query(c -> c.store().pool().usedSlots() - c.metrics().prefixCheckpoints));
        assertTrue(engine.query(c -> c.metrics().aborted) >= 1);
        assertEquals(null, failure.get());
    }

    @Test
    void invalidRequestsAreRejectedBeforeTheyRun() {
        InvalidRequestException e = assertThrows(InvalidRequestException.class,
                () -> engine.validate(GenerationRequest.of("bad", new int[0], EngineHarness.greedy(4))));
        assertEquals("prompt", e.param());
        e = assertThrows(InvalidRequestException.class,
                () -> engine.validate(GenerationRequest.of("bad", new int[] {1}, EngineHarness.greedy(4))
                        .withStrategy("no-such-strategy")));
        assertEquals("rollback_strategy", e.param());
    }

    @Test
    void abWeightsParse() {
        assertEquals(Map.of("replay", 90, "intermediate-copy", 10), Engine.parseWeights("replay=90, intermediate-copy=10"));
        assertEquals(Map.of(), Engine.parseWeights(""));
        assertThrows(IllegalArgumentException.class, () -> Engine.parseWeights("replay"));
        assertThrows(IllegalArgumentException.class, () -> Engine.parseWeights("replay=-1"));
    }
}
