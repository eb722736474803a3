package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.StateLayout;
import dev.hyspec.model.HybridModel;
import dev.hyspec.spec.ScriptedDrafter;
import dev.hyspec.state.LayoutPolicy;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 2: a scripted drafter forces every acceptance count {@code a ∈ 1…T} and
 * interleaves steps without drafts right after steps with drafts; after every step the committed
 * recurrent state (conv window and SSM state of every layer) equals a from-scratch prefill of the
 * committed tokens. Run for both strategies, in the model's natural layout and with generate rows in
 * the other layout (so every step converts).
 */
class ScriptedAcceptanceStateTest {
    private static final int K = 4;
    /** Accepted drafts per step; -1 = a step without drafts. Covers 0…K, and no-draft steps after draft steps. */
    private static final int[] PATTERN = {4, 0, -1, 1, 2, -1, 3, -1, 4, 4, 0, 2, -1, -1, 1, 3};

    @TestFactory
    Stream<DynamicTest> committedStateEqualsRecomputeAfterEveryStep() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                for (boolean swapped : new boolean[] {false, true}) {
                    tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy + (swapped ? " / other layout" : ""),
                            () -> check(f, strategy, swapped)));
                }
            }
        }
        return tests.stream();
    }

    private static void check(Fixture f, String strategy, boolean swapped) {
        HybridModel model = EngineHarness.model(f);
        int[] prompt = f.prompts().get(0);
        int n = 60;
        int[] ref = EngineHarness.referenceGreedy(model, prompt, n);
        StateLayout natural = model.naturalLayout();
        EngineOptions options = EngineOptions.defaults().withDrafts(K).withStrategy(strategy, Map.of())
                .withPrefixCache(false, 16)
                .withLayouts(swapped ? new LayoutPolicy(natural, natural.other()) : LayoutPolicy.of(natural));
        EngineCore core = EngineHarness.engine(model, options);
        int vocab = model.config().vocabSize();
        List<Integer> forced = new ArrayList<>();
        ScriptedDrafter drafter = ScriptedDrafter.of((step, tokens, length, numDrafts) -> {
            int a = PATTERN[step % PATTERN.length];
            int p = length - prompt.length;
            int d = Math.min(Math.min(K, numDrafts), ref.length - p);
            if (a < 0 || d <= 0) {
                forced.add(-1);
                return new int[0];
            }
            int[] drafts = Arrays.copyOfRange(ref, p, p + d);
            if (a < d) {
                drafts[a] = (ref[p + a] + 1) % vocab;
            }
            forced.add(Math.min(a, d));
            return drafts;
        });
        EngineHarness.Collector out = new EngineHarness.Collector();
        core.add(new GenerationRequest("r", prompt, greedy(n), K, drafter, null), out);
        int steps = 0;
        while (core.hasWork()) {
            core.step();
            steps++;
            int computed = core.computedTokensOf("r");
            if (computed < 0) {
                break;   // finished
            }
            int slot = core.copyCommitted("r");
            int[] committed = Arrays.copyOf(core.tokensOf("r"), computed);
            EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), slot, committed,
                    f.name() + " / " + strategy + " after step " + steps + " (" + computed + " tokens)");
            core.store().pool().release(slot);
        }
        assertArrayEquals(ref, out.output(), "output");
        // the script really forced what it meant to: the verifier accepted exactly the forced counts
        int[] accepted = drafter.acceptedCounts();
        int[] wanted = forced.stream().filter(a -> a >= 0).mapToInt(Integer::intValue).toArray();
        assertArrayEquals(wanted, Arrays.copyOf(accepted, wanted.length), "accepted drafts per step");
        for (int a = 0; a <= K; a++) {
            final int want = a;
            assertTrue(Arrays.stream(wanted).anyMatch(x -> x == want), "acceptance " + a + " never forced");
        }
        core.close();
    }
}
