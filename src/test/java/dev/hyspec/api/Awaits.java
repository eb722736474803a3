package dev.hyspec.api;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.hyspec.engine.Engine;
import dev.hyspec.engine.EngineCore;
import dev.hyspec.engine.EngineMetrics;

/** Waits for the engine to settle and checks that nothing leaked. */
final class Awaits {
    private Awaits() {}

    /**
     * Waits (up to 5 s) until no request is in flight, then checks that the only state slots in use
     * are the prefix cache's checkpoints and that every KV page in use is held by the cache alone.
     */
    static void idle(Engine engine) {
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (engine.inFlight() > 0 && System.nanoTime() < deadline) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
        assertEquals(0, engine.inFlight(), "requests still in flight");
        assertEquals(0, (int) engine.query(EngineCore::numRunning), "running");
        assertEquals(0, (int) engine.query(EngineCore::numWaiting), "waiting");
        int[] pools = engine.query(c -> {
            EngineMetrics m = c.metrics();
            int pagesPerBlock = c.options().prefixBlockSize() / c.options().pageSize();
            int cachedPages = c.store().kv().enabled() ? m.prefixBlocks * pagesPerBlock : 0;
            return new int[] {m.prefixCheckpoints, c.store().pool().usedSlots(), cachedPages, c.store().kv().usedPages()};
        });
        assertEquals(pools[0], pools[1], "slots in use beyond the prefix cache's checkpoints");
        assertEquals(pools[2], pools[3], "KV pages in use beyond the prefix cache's");
    }
}
