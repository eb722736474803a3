package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.Fixtures.Fixture;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The model marks graph-eligible steps for the backend: a step of decode and verify rows only runs
 * its forward pass between one {@code beginGraph} and one {@code endGraph}, and the engine reads the
 * logits only after {@code endGraph}; a step with a prefill chunk is never bracketed.
 */
class GraphBracketTest {

    @Test
    void onlyStepsWithoutPrefillRowsAreBracketed() {
        CpuBackend cpu = new CpuBackend();
        List<String> calls = new ArrayList<>();
        InvocationHandler h = (proxy, method, args) -> {
            calls.add(method.getName());
            try {
                return method.invoke(cpu, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        };
        Backend traced = (Backend) Proxy.newProxyInstance(Backend.class.getClassLoader(), new Class<?>[] {Backend.class},
                h);
        Fixture f = Fixtures.named("nemotron_h");
        HybridModel model = HybridModel.load(Checkpoint.open(f.dir()), traced);
        EngineOptions options = EngineOptions.defaults().withDrafts(3).withBudget(4, 8)
                .withStrategy(EngineHarness.STRATEGIES.get(0), Map.of());
        EngineCore core = EngineHarness.engine(model, options);
        int vocab = model.config().vocabSize();
        core.add(GenerationRequest.of("a", EngineHarness.repetitivePrompt(21, 4, 1, vocab), greedy(12)),
                new EngineHarness.Collector());
        core.add(GenerationRequest.of("b", f.prompts().get(0), greedy(12)).withDrafter(null, 0),
                new EngineHarness.Collector());
        int bracketed = 0;
        int plain = 0;
        while (core.hasWork()) {
            calls.clear();
            core.step();
            boolean prefill = core.lastStep().stream().anyMatch(r -> r.mode() == RowMode.PREFILL);
            long begins = calls.stream().filter("beginGraph"::equals).count();
            long ends = calls.stream().filter("endGraph"::equals).count();
            if (prefill) {
                assertEquals(0, begins + ends, "a step with a prefill chunk is not recorded: " + calls);
                plain++;
            } else {
                assertEquals(1, begins, calls.toString());
                assertEquals(1, ends, calls.toString());
                int begin = calls.indexOf("beginGraph");
                int end = calls.indexOf("endGraph");
                // greedy rows without logprobs read only the argmax of their logits
                int read = calls.indexOf("argmax");
                assertTrue(begin < end && calls.subList(begin, end).contains("matmul"), calls.toString());
                assertTrue(read > end && !calls.contains("download"),
                        "the logits' argmax is read after the recorded step ends: " + calls);
                assertTrue(calls.subList(begin, end).contains("mamba2ReplayVerifyBatch")
                        || calls.subList(begin, end).contains("mamba2ScanStatesBatch"),
                        "a recorded step verifies its rows in one batched call per layer: " + calls);
                bracketed++;
            }
        }
        assertTrue(bracketed > 0 && plain > 0, "both kinds of step ran: " + bracketed + " / " + plain);
        core.close();
    }
}
