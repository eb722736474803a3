package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.testing.Fixtures.Fixture;
import dev.hyspec.testing.TestBackends;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The Qwen3-Next sparse-MoE fixture through the engine, decode and verify steps routing on the
 * backend: every recorded step (no prefill row) routes inside its graph bracket without a download,
 * and the greedy output equals transformers' rollout for both strategies, with and without drafts.
 * On the CUDA backend ({@code -Dhyspec.test.backend=cuda}) plain decode steps also replay captured
 * graphs.
 */
class MoeDecodeStepsTest {

    @TestFactory
    Stream<DynamicTest> moeStepsRouteOnTheBackendAndMatchTransformers() {
        List<DynamicTest> tests = new ArrayList<>();
        for (String strategy : EngineHarness.STRATEGIES) {
            for (int drafts : new int[] {0, 3}) {
                tests.add(DynamicTest.dynamicTest(strategy + " / K=" + drafts, () -> check(strategy, drafts)));
            }
        }
        return tests.stream();
    }

    private static void check(String strategy, int drafts) {
        Fixture f = EngineHarness.fixture("qwen3_next");
        Backend backend = TestBackends.create();
        List<String> calls = new ArrayList<>();
        InvocationHandler h = (proxy, method, args) -> {
            calls.add(method.getName());
            try {
                return method.invoke(backend, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        };
        Backend traced = (Backend) Proxy.newProxyInstance(Backend.class.getClassLoader(), new Class<?>[] {Backend.class},
                h);
        HybridModel model = HybridModel.load(Checkpoint.open(f.dir()), traced);
        int vocab = model.config().vocabSize();
        EngineOptions options = EngineOptions.defaults().withDrafts(Math.max(drafts, 1)).withBudget(4, 64)
                .withStrategy(strategy, Map.of());
        EngineCore core = EngineHarness.engine(model, options);
        List<GenerationRequest> requests = new ArrayList<>();
        Map<String, EngineHarness.Collector> out = new java.util.LinkedHashMap<>();
        for (int i = 0; i < f.prompts().size(); i++) {
            int[] prompt = f.prompts().get(i);
            int[] want = f.greedy().get(i);
            GenerationRequest r = GenerationRequest.of("p" + i, prompt, greedy(want.length));
            r = drafts == 0 ? r.withDrafter(null, 0)
                    : r.withDrafter(EngineHarness.noisyOracle(want, prompt.length, vocab, 17 + i), drafts);
            requests.add(r);
            EngineHarness.Collector c = new EngineHarness.Collector();
            out.put(r.id(), c);
            core.add(r, c);
        }
        long[] graphsBefore = backend instanceof CudaBackend cuda ? cuda.graphCounts() : null;
        int recorded = 0;
        while (core.hasWork()) {
            calls.clear();
            core.step();
            if (core.lastStep().stream().anyMatch(r -> r.mode() == RowMode.PREFILL)) {
                continue;
            }
            int begin = calls.indexOf("beginGraph");
            int end = calls.indexOf("endGraph");
            assertTrue(begin >= 0 && end > begin, calls.toString());
            List<String> step = calls.subList(begin, end);
            assertTrue(step.contains("moeRoute") && step.contains("moeExpertMatmul") && step.contains("moeCombine"),
                    "a recorded step routes its experts on the backend: " + step);
            assertTrue(!step.contains("download"), "nothing is downloaded inside a recorded step: " + step);
            recorded++;
        }
        core.close();
        assertTrue(recorded > 0, "decode/verify steps ran");
        for (int i = 0; i < f.prompts().size(); i++) {
            EngineHarness.Collector c = out.get("p" + i);
            assertEquals(FinishReason.LENGTH, c.reason, "p" + i + ": " + c.error);
            assertArrayEquals(f.greedy().get(i), c.output(), strategy + " / K=" + drafts + " / prompt " + i);
        }
        if (graphsBefore != null) {
            long[] after = ((CudaBackend) backend).graphCounts();
            long captured = after[0] - graphsBefore[0];
            long replayed = after[1] - graphsBefore[1];
            System.out.printf("[gpu] qwen3_next / %s / K=%d: %d recorded steps, graphs captured %d, replayed %d, "
                    + "eager %d, abandoned %d%n", strategy, drafts, recorded, captured, replayed,
                    after[2] - graphsBefore[2], after[3] - graphsBefore[3]);
            if (drafts == 0) {
                assertTrue(captured > 0 && replayed > captured, "MoE decode steps replay captured graphs: captured "
                        + captured + ", replayed " + replayed);
            }
        }
    }
}
