package dev.hyspec.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.Sequence;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.RecurrentShape;

/** Comparisons of recurrent state against a from-scratch recompute (a fresh {@link Sequence} prefill). */
public final class StateAssertions {
    private StateAssertions() {}

    /**
     * Asserts that {@code slot} of {@code pool} holds the state a fresh prefill of {@code tokens}
     * produces: every recurrent layer's conv window and SSM state (compared in the reference's
     * layout), max |Δ| ≤ 1e−5 · max(1, max |ref|).
     */
    public static void assertStateEqualsRecompute(HybridModel model, MambaStatePool pool, int slot, int[] tokens, String what) {
        Backend backend = model.backend();
        try (Sequence ref = model.newSequence(tokens.length)) {
            ref.forward(tokens, false);
            MambaStatePool rp = ref.store().pool();
            for (int l = 0; l < pool.numLayers(); l++) {
                RecurrentShape s = pool.layers().get(l);
                float[] wantConv = backend.download(rp.conv(l, ref.slot()));
                float[] gotConv = backend.download(pool.conv(l, slot));
                assertClose(wantConv, gotConv, what + ", layer " + l + " conv window");
                float[] wantSsm = inLayout(backend.download(rp.ssm(l, ref.slot())), rp.layout(ref.slot()), s, StateLayout.KV);
                float[] gotSsm = inLayout(backend.download(pool.ssm(l, slot)), pool.layout(slot), s, StateLayout.KV);
                assertClose(wantSsm, gotSsm, what + ", layer " + l + " state");
            }
        }
    }

    /** A state's elements rearranged from layout {@code have} to {@code want} (plain loops). */
    public static float[] inLayout(float[] data, StateLayout have, RecurrentShape s, StateLayout want) {
        if (have == want) {
            return data;
        }
        int rows = have == StateLayout.KV ? s.keyDim() : s.valueDim();
        int cols = have == StateLayout.KV ? s.valueDim() : s.keyDim();
        float[] out = new float[data.length];
        for (int h = 0; h < s.heads(); h++) {
            int base = h * rows * cols;
            for (int i = 0; i < rows; i++) {
                for (int j = 0; j < cols; j++) {
                    out[base + j * rows + i] = data[base + i * cols + j];
                }
            }
        }
        return out;
    }

    public static void assertClose(float[] want, float[] got, String what) {
        assertEquals(want.length, got.length, what + ": length");
        double scale = 1;
        double max = 0;
        for (int i = 0; i < want.length; i++) {
            scale = Math.max(scale, Math.abs(want[i]));
            max = Math.max(max, Math.abs(want[i] - got[i]));
        }
        assertTrue(max <= 1e-5 * scale, what + ": max |Δ| = " + max + " (scale " + scale + ")");
    }

}
