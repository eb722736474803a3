package dev.hyspec.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.testing.TestBackends;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.state.KvBlockPool;
import dev.hyspec.state.MambaStatePool;
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
    /**
     * On the CPU both runs take the same float32 code paths. On the GPU a chunk and the whole prompt
     * may take different matmul kernels (decode-shaped GEMV for a few tokens, tiled GEMM for many), whose
     * float32 sums round in another order, so they agree to 1e-4 rather than 1e-5.
     */
    private static final double TOLERANCE = TestBackends.selected().equals("cuda") ? 1e-4 : 1e-5;

    @TestFactory
    Stream<DynamicTest> chunkedPrefillEqualsOneShot() {
        return Fixtures.all().stream().map(f -> DynamicTest.dynamicTest(f.name(), () -> check(f)));
    }

    private static void check(Fixture f) {
        Backend backend = TestBackends.create();
        HybridModel model = HybridModel.load(Checkpoint.open(f.dir()), backend);
        int[] prompt = f.prompts().stream().max((a, b) -> a.length - b.length).orElseThrow();
        int vocab = model.config().vocabSize();

        Sequence whole = model.newSequence(prompt.length);
        float[] wholeLogits = backend.download(whole.forward(prompt, true));

        Sequence chunked = model.newSequence(prompt.length);
        float[] chunkedLogits = new float[prompt.length * vocab];
        int[] cuts = {0, 1, 4, 11, prompt.length};   // chunks of 1, 3, 7 and the rest
        for (int c = 0; c + 1 < cuts.length; c++) {
            int[] chunk = Arrays.copyOfRange(prompt, cuts[c], cuts[c + 1]);
            float[] l = backend.download(chunked.forward(chunk, true));
            System.arraycopy(l, 0, chunkedLogits, cuts[c] * vocab, l.length);
        }

        assertEquals(whole.length(), chunked.length());
        assertClose(wholeLogits, chunkedLogits, f.name() + " logits");
        MambaStatePool wp = whole.store().pool();
        MambaStatePool cp = chunked.store().pool();
        for (int l = 0; l < wp.numLayers(); l++) {
            assertClose(backend.download(wp.conv(l, whole.slot())), backend.download(cp.conv(l, chunked.slot())),
                    f.name() + " recurrent layer " + l + " conv");
            assertClose(backend.download(wp.ssm(l, whole.slot())), backend.download(cp.ssm(l, chunked.slot())),
                    f.name() + " recurrent layer " + l + " ssm");
        }
        KvBlockPool wk = whole.store().kv();
        KvBlockPool ck = chunked.store().kv();
        for (int l = 0; l < model.kvWidths().length; l++) {
            assertClose(positions(backend, wk, wk.keys(l), whole.blockTable(), prompt.length),
                    positions(backend, ck, ck.keys(l), chunked.blockTable(), prompt.length),
                    f.name() + " attention layer " + l + " keys");
            assertClose(positions(backend, wk, wk.values(l), whole.blockTable(), prompt.length),
                    positions(backend, ck, ck.values(l), chunked.blockTable(), prompt.length),
                    f.name() + " attention layer " + l + " values");
        }
        whole.close();
        chunked.close();
    }

    /** Rows of positions {@code 0 … n−1} gathered through a block table. */
    private static float[] positions(Backend backend, KvBlockPool kv, Tensor pages, int[] table, int n) {
        float[] all = backend.download(pages);
        int w = pages.cols();
        float[] out = new float[n * w];
        for (int p = 0; p < n; p++) {
            int row = table[p / kv.pageSize()] * kv.pageSize() + p % kv.pageSize();
            System.arraycopy(all, row * w, out, p * w, w);
        }
        return out;
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
