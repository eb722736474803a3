package dev.hyspec.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.engine.Engine;
import dev.hyspec.engine.EngineMetrics;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

/**
 * A client that hangs up mid-stream aborts its request: within a few engine steps nothing is in
 * flight, the abort is counted, and the pools hold only the prefix cache's blocks. Holds for both
 * strategies and for a request still waiting behind others.
 */
@QuarkusTest
class CancellationTest {
    @Inject
    Engine engine;

    private long aborted() {
        return engine.metrics().map(m -> m.aborted).orElseThrow();
    }

    @Test
    void closingTheConnectionAbortsTheRequestAndFreesItsSlot() {
        for (String strategy : new String[] {"replay", "intermediate-copy"}) {
            long before = aborted();
            try (RawHttp http = new RawHttp("/v1/completions", "{\"prompt\": [5, 6, 7, 8, 5, 6, 7, 8], "
                    + "\"max_tokens\": 3000, \"ignore_eos\": true, \"temperature\": 0, \"stream\": true, "
                    + "\"rollback_strategy\": \"" + strategy + "\"}")) {
                assertEquals(200, http.status);
                http.readEvents(3);
                assertEquals(1, engine.inFlight(), "the request is running");
                assertTrue(engine.query(c -> c.store().pool().usedSlots()) >= 1);
            }
            long closed = System.nanoTime();
            Awaits.idle(engine);
            assertEquals(before + 1, aborted(), strategy + ": the hang-up aborted the request");
            assertTrue(System.nanoTime() - closed < 5_000_000_000L);
        }
    }

    @Test
    void closingANonStreamingRequestAbortsItToo() {
        long before = aborted();
        try (RawHttp http = new RawHttp("/v1/completions", "{\"prompt\": [5, 6, 7], \"max_tokens\": 3000, "
                + "\"ignore_eos\": true, \"temperature\": 0}", false)) {
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (engine.inFlight() == 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(1, engine.inFlight());
        }
        Awaits.idle(engine);
        assertEquals(before + 1, aborted());
        EngineMetrics m = engine.metrics().orElseThrow();
        assertEquals(0, m.running);
    }
}
