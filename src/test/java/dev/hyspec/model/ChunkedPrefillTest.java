package dev.hyspec.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.layers.KvCache;
import dev.hyspec.model.layers.LayerState;
import dev.hyspec.model.layers.RecurrentState;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.Arrays;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * A prompt prefilled in several chunks (each continuing from the state the previous one left)
 * gives the same logits and the same recurrent states and KV entries as one prefill of the whole
 * prompt, for every architecture.
 */
class ChunkedPrefillTest {
    private static final double TOLERANCE = 1e-5;

    @TestFactory
    Stream<DynamicTest> chunkedPrefillEqualsOneShot() {
        return Fixtures.all().stream().map(f -> DynamicTest.dynamicTest(f.name(), () -> check(f)));
    }

    private static void check(Fixture f) {
        Backend backend = new CpuBackend();
        HybridModel model = HybridModel.load(Checkpoint.open(f.dir()), backend);
        int[] prompt = f.prompts().stream().max((a, b) -> a.length - b.length).orElseThrow();
        int vocab = model.config().vocabSize();

        SequenceState whole = model.newSequence();
        float[] wholeLogits = backend.download(model.forward(whole, prompt, true));

        SequenceState chunked = model.newSequence();
        float[] chunkedLogits = new float[prompt.length * vocab];
        int[] cuts = {0, 1, 4, 11, prompt.length};   // chunks of 1, 3, 7 and the rest
        for (int c = 0; c + 1 < cuts.length; c++) {
            int[] chunk = Arrays.copyOfRange(prompt, cuts[c], cuts[c + 1]);
            float[] l = backend.download(model.forward(chunked, chunk, true));
            System.arraycopy(l, 0, chunkedLogits, cuts[c] * vocab, l.length);
        }

        assertEquals(whole.numComputedTokens(), chunked.numComputedTokens());
        assertClose(wholeLogits, chunkedLogits, f.name() + " logits");
        for (int b = 0; b < whole.layers().size(); b++) {
            LayerState a = whole.layer(b);
            LayerState c = chunked.layer(b);
            if (a instanceof RecurrentState ra) {
                RecurrentState rc = (RecurrentState) c;
                assertClose(backend.download(ra.conv()), backend.download(rc.conv()), f.name() + " block " + b + " conv");
                assertClose(backend.download(ra.ssm()), backend.download(rc.ssm()), f.name() + " block " + b + " ssm");
            } else if (a instanceof KvCache ka) {
                KvCache kc = (KvCache) c;
                assertClose(rows(backend, ka.keys(), prompt.length), rows(backend, kc.keys(), prompt.length),
                        f.name() + " block " + b + " keys");
                assertClose(rows(backend, ka.values(), prompt.length), rows(backend, kc.values(), prompt.length),
                        f.name() + " block " + b + " values");
            }
        }
    }

    private static float[] rows(Backend backend, Tensor t, int n) {
        return Arrays.copyOf(backend.download(t), n * t.cols());
    }

    private static void assertClose(float[] want, float[] got, String what) {
        assertEquals(want.length, got.length, what + " length");
        double max = 0;
        for (int i = 0; i < want.length; i++) {
            max = Math.max(max, Math.abs(want[i] - got[i]) / Math.max(1.0, Math.abs(want[i])));
        }
        assertTrue(max <= TOLERANCE, what + ": max relative difference " + max);
    }
}
