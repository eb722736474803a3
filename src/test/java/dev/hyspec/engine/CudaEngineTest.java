package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.HybridModel;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.Fixtures.Fixture;
import dev.hyspec.testing.TestBackends;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;

/**
 * The engine on the GPU against the engine on the CPU reference: the same greedy tokens for a batch
 * of requests, with and without drafts, for both strategies, stepped on a thread other than the one
 * that loaded the model (as the server does); decode steps replayed as captured graphs; and every
 * device byte an engine took given back when it closes.
 */
@Tag("gpu")
class CudaEngineTest {

    @TestFactory
    Stream<DynamicTest> gpuEngineEqualsCpuEngine() {
        assumeTrue(TestBackends.selected().equals("cuda"), "GPU run only (-Dhyspec.test.backend=cuda)");
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : Fixtures.all()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                for (int drafts : new int[] {0, 3}) {
                    tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy + " / K=" + drafts,
                            () -> check(f, strategy, drafts)));
                }
            }
        }
        return tests.stream();
    }

    private static void check(Fixture f, String strategy, int drafts) {
        HybridModel gpuModel = EngineHarness.model(f);
        CudaBackend gpu = (CudaBackend) gpuModel.backend();
        HybridModel cpuModel = HybridModel.load(Checkpoint.open(f.dir()), new CpuBackend());
        int vocab = gpuModel.config().vocabSize();
        EngineOptions options = EngineOptions.defaults().withDrafts(Math.max(drafts, 1)).withBudget(8, 64)
                .withStrategy(strategy, Map.of());
        List<GenerationRequest> requests = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            int[] prompt = i < f.prompts().size() ? f.prompts().get(i) : EngineHarness.repetitivePrompt(11 + i, 4, i, vocab);
            GenerationRequest r = GenerationRequest.of("r" + i, prompt, greedy(40 + 5 * i));
            requests.add(drafts == 0 ? r.withDrafter(null, 0) : r);
        }
        requests.add(GenerationRequest.of("rep", EngineHarness.repetitivePrompt(17, 5, 7, vocab), greedy(48)));

        long bytesBefore = gpu.liveBytes();
        long[] graphsBefore = gpu.graphCounts();
        // As in the server: the model was loaded on another thread; an engine thread of its own steps it.
        EngineCore gpuCore = EngineHarness.engine(gpuModel, options);
        AtomicReference<Map<String, EngineHarness.Collector>> result = new AtomicReference<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread engineThread = new Thread(() -> {
            try {
                result.set(EngineHarness.run(gpuCore, requests));
            } catch (Throwable e) {
                failure.set(e);
            }
        }, "hyspec-engine-test");
        engineThread.start();
        try {
            engineThread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
        if (failure.get() != null) {
            throw new AssertionError("engine thread failed", failure.get());
        }
        Map<String, EngineHarness.Collector> got = result.get();
        long[] graphsAfter = gpu.graphCounts();
        gpuCore.close();
        assertEquals(bytesBefore, gpu.liveBytes(), "device bytes held after the engine closed");

        EngineCore cpuCore = EngineHarness.engine(cpuModel, options);
        Map<String, EngineHarness.Collector> want = EngineHarness.run(cpuCore, requests);
        cpuCore.close();
        for (GenerationRequest r : requests) {
            assertEquals(FinishReason.LENGTH, got.get(r.id()).reason, r.id() + ": " + got.get(r.id()).error);
            assertArrayEquals(want.get(r.id()).output(), got.get(r.id()).output(), f.name() + " / " + r.id());
        }
        long captured = graphsAfter[0] - graphsBefore[0];
        long replayed = graphsAfter[1] - graphsBefore[1];
        System.out.printf("[gpu] %s / %s / K=%d: graphs captured %d, steps replayed %d, eager %d, abandoned %d%n",
                f.name(), strategy, drafts, captured, replayed, graphsAfter[2] - graphsBefore[2],
                graphsAfter[3] - graphsBefore[3]);
        if (drafts == 0) {
            assertTrue(captured > 0 && replayed > captured, "plain decode steps should replay captured graphs: captured "
                    + captured + ", replayed " + replayed);
        }
    }
}
