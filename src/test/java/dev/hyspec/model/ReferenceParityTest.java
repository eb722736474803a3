package dev.hyspec.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.testing.TestBackends;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.checkpoint.TensorEntry;
import dev.hyspec.sampling.Sampler;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 9: every reference checkpoint reproduces transformers' full-sequence logits
 * (max |Δ| ≤ 1e-3) and its greedy rollout through the recurrent/KV state, token for token.
 */
class ReferenceParityTest {
    static final double LOGITS_TOLERANCE = 1e-3;

    @TestFactory
    Stream<DynamicTest> logitsAndGreedyRolloutsMatchTransformers() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : Fixtures.all()) {
            for (int i = 0; i < f.prompts().size(); i++) {
                int p = i;
                tests.add(DynamicTest.dynamicTest(f.name() + " prompt " + p + " logits",
                        () -> checkLogits(f, p)));
                tests.add(DynamicTest.dynamicTest(f.name() + " prompt " + p + " greedy rollout",
                        () -> checkGreedy(f, p)));
            }
        }
        return tests.stream();
    }

    static void checkLogits(Fixture f, int p) {
        Backend backend = TestBackends.create();
        HybridModel model = HybridModel.load(Checkpoint.open(f.dir()), backend);
        int[] prompt = f.prompts().get(p);
        float[] got = backend.download(model.newSequence(prompt.length).forward(prompt, true));
        TensorEntry ref = f.logits(p);
        float[] want = ref.toFloatArray();
        assertArrayEquals(new int[] {prompt.length, model.config().vocabSize()}, ref.shape());
        double maxDiff = maxAbsDiff(got, want);
        assertTrue(maxDiff <= LOGITS_TOLERANCE, f.name() + " prompt " + p + ": max |Δlogits| = " + maxDiff);
    }

    static void checkGreedy(Fixture f, int p) {
        Backend backend = TestBackends.create();
        HybridModel model = HybridModel.load(Checkpoint.open(f.dir()), backend);
        int[] want = f.greedy().get(p);
        int[] got = greedy(model, f.prompts().get(p), want.length);
        assertArrayEquals(want, got, f.name() + " prompt " + p + " greedy rollout");
    }

    /** Prefill the prompt, then decode one token at a time through the state. */
    static int[] greedy(HybridModel model, int[] prompt, int n) {
        int[] out = new int[n];
        try (Sequence seq = model.newSequence(prompt.length + n)) {
            Tensor logits = seq.forward(prompt, false);
            for (int i = 0; i < n; i++) {
                out[i] = Sampler.argmax(model.backend().download(logits));
                if (i + 1 < n) {
                    logits = seq.forward(new int[] {out[i]}, false);
                }
            }
        }
        return out;
    }


    static double maxAbsDiff(float[] a, float[] b) {
        if (a.length != b.length) {
            throw new AssertionError("length " + a.length + " vs " + b.length);
        }
        double m = 0;
        for (int i = 0; i < a.length; i++) {
            m = Math.max(m, Math.abs(a[i] - b[i]));
        }
        return m;
    }
}
