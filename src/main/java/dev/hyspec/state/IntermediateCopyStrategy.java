package dev.hyspec.state;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import io.smallrye.common.annotation.Identifier;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * DESIGN §4 I3: the verify pass reads {@code S(L)} once and writes {@code S(L+i+1)} for every
 * position {@code i} of the row into the slot's scratch states; commit copies scratch {@code a−1}
 * into the slot and moves the conv window over the {@code a} accepted inputs.
 */
@ApplicationScoped
@Identifier(IntermediateCopyStrategy.ID)
public class IntermediateCopyStrategy implements RollbackStrategy {
    public static final String ID = "intermediate-copy";

    @Override
    public String id() {
        return ID;
    }

    @Override
    public void verify(MambaStatePool pool, int slot, RecurrentOps ops, RecurrentRow row, Tensor y) {
        Backend backend = pool.backend();
        int layer = ops.poolLayer();
        int tokens = row.tokens();
        Workspace ws = pool.workspace(slot, ID, () -> new Workspace(pool));
        Tensor[] scratch = ws.scratch(layer, tokens);
        Tensor raw = ws.raw(layer, tokens);
        backend.copyRows(row.raw(), 0, raw, 0, tokens);
        ws.rows = tokens;
        Tensor conv = backend.zeros(tokens, ops.shape().convDim());
        ops.convolve(row.raw(), pool.conv(layer, slot), false, conv);
        ops.scanStates(pool.ssm(layer, slot), pool.layout(slot), conv, row, scratch, y);
        backend.free(conv);
    }

    /** The verify of every row: one conv and one scan-states launch write every row's scratch states. */
    @Override
    public void verifyBatch(MambaStatePool pool, int[] slots, RecurrentOps ops, RecurrentRow rows, int[] lengths,
                            int tokensPerRow, Tensor y) {
        Backend backend = pool.backend();
        int layer = ops.poolLayer();
        int n = slots.length;
        Tensor[] states = new Tensor[n];
        Tensor[] windows = new Tensor[n];
        Tensor[][] scratch = new Tensor[n][];
        Tensor[] raws = new Tensor[n];
        StateLayout layout = pool.layout(slots[0]);
        for (int r = 0; r < n; r++) {
            Workspace ws = pool.workspace(slots[r], ID, () -> new Workspace(pool));
            if (pool.layout(slots[r]) != layout) {
                throw new IllegalStateException("a batched verify needs every slot in one layout");
            }
            states[r] = pool.ssm(layer, slots[r]);
            windows[r] = pool.conv(layer, slots[r]);
            scratch[r] = ws.scratch(layer, tokensPerRow);
            raws[r] = ws.raw(layer, tokensPerRow);
            ws.rows = lengths[r];
        }
        backend.scatterRowBlocks(rows.raw(), tokensPerRow, raws);
        Tensor conv = backend.zeros(rows.tokens(), ops.shape().convDim());
        ops.convolveBatch(rows.raw(), windows, tokensPerRow, conv);
        ops.scanStatesBatch(states, layout, conv, rows, scratch, tokensPerRow, y);
        backend.free(conv);
    }

    /**
     * The commits of a step, every row and every layer of one shape together: one state copy and one
     * window shift launch per layer shape (one in all for the models hyspec serves).
     */
    @Override
    public void commitBatch(MambaStatePool pool, int[] slots, RecurrentOps[] layers, int[] accepted) {
        Workspace[] spaces = new Workspace[slots.length];
        for (int r = 0; r < slots.length; r++) {
            spaces[r] = requireVerified(pool, slots[r], accepted[r]);   // all checked before anything runs
        }
        Map<RecurrentShape, List<RecurrentOps>> byShape = new LinkedHashMap<>();
        for (RecurrentOps ops : layers) {
            byShape.computeIfAbsent(ops.shape(), k -> new ArrayList<>()).add(ops);
        }
        Backend backend = pool.backend();
        for (List<RecurrentOps> group : byShape.values()) {
            int n = slots.length * group.size();
            Tensor[] src = new Tensor[n];
            Tensor[] dst = new Tensor[n];
            Tensor[] windows = new Tensor[n];
            Tensor[] raws = new Tensor[n];
            int[] counts = new int[n];
            int i = 0;
            for (int r = 0; r < slots.length; r++) {
                for (RecurrentOps ops : group) {
                    int l = ops.poolLayer();
                    src[i] = spaces[r].scratch[l][accepted[r] - 1];
                    dst[i] = pool.ssm(l, slots[r]);
                    windows[i] = pool.conv(l, slots[r]);
                    raws[i] = spaces[r].raw[l];
                    counts[i] = accepted[r];
                    i++;
                }
            }
            backend.copyBatch(src, dst);
            backend.shiftWindowBatch(windows, raws, counts);
        }
        for (Workspace ws : spaces) {
            ws.rows = 0;
        }
    }

    @Override
    public void snapshot(MambaStatePool pool, int slot, RecurrentOps[] layers, int tokens, int target) {
        Backend backend = pool.backend();
        Workspace ws = requireVerified(pool, slot, tokens);
        for (RecurrentOps ops : layers) {
            int l = ops.poolLayer();
            backend.copy(ws.scratch[l][tokens - 1], pool.ssm(l, target));
            backend.copy(pool.conv(l, slot), pool.conv(l, target));
            backend.shiftWindow(pool.conv(l, target), ws.raw[l], tokens);
        }
        pool.setLayout(target, pool.layout(slot));
    }

    @Override
    public void commit(MambaStatePool pool, int slot, RecurrentOps[] layers, int accepted) {
        Backend backend = pool.backend();
        Workspace ws = requireVerified(pool, slot, accepted);
        for (RecurrentOps ops : layers) {
            int l = ops.poolLayer();
            backend.copy(ws.scratch[l][accepted - 1], pool.ssm(l, slot));
            backend.shiftWindow(pool.conv(l, slot), ws.raw[l], accepted);
        }
        ws.rows = 0;
    }

    @Override
    public void copyCommitted(MambaStatePool pool, int slot, RecurrentOps[] layers, int target) {
        pool.copy(slot, target);
    }

    @Override
    public void settle(MambaStatePool pool, int slot, RecurrentOps[] layers) {
        // Commit is eager: the slot always holds S(L).
    }

    private static Workspace requireVerified(MambaStatePool pool, int slot, int tokens) {
        Workspace ws = pool.workspaceIfPresent(slot, ID);
        if (ws == null || tokens < 1 || tokens > ws.rows) {
            throw new IllegalStateException("slot " + slot + ": " + tokens + " tokens of a row of "
                    + (ws == null ? 0 : ws.rows) + " verified");
        }
        return ws;
    }

    /** Per layer: scratch states for every position of a row and the row's pre-conv inputs. */
    static final class Workspace implements SlotWorkspace {
        private final MambaStatePool pool;
        final Tensor[][] scratch;
        final Tensor[] raw;
        int rows;

        Workspace(MambaStatePool pool) {
            this.pool = pool;
            this.scratch = new Tensor[pool.numLayers()][0];
            this.raw = new Tensor[pool.numLayers()];
        }

        Tensor[] scratch(int layer, int tokens) {
            Tensor[] have = scratch[layer];
            if (have.length < tokens) {
                RecurrentShape s = pool.layers().get(layer);
                Tensor[] grown = java.util.Arrays.copyOf(have, tokens);
                for (int i = have.length; i < tokens; i++) {
                    grown[i] = pool.backend().zeros(s.heads(), s.keyDim(), s.valueDim());
                }
                scratch[layer] = grown;
            }
            return scratch[layer];
        }

        Tensor raw(int layer, int tokens) {
            if (raw[layer] == null || raw[layer].rows() < tokens) {
                if (raw[layer] != null) {
                    pool.backend().free(raw[layer]);
                }
                raw[layer] = pool.backend().zeros(tokens, pool.layers().get(layer).convDim());
            }
            return raw[layer];
        }

        @Override
        public void reset() {
            for (int l = 0; l < scratch.length; l++) {
                for (Tensor t : scratch[l]) {
                    pool.backend().zero(t);
                }
                if (raw[l] != null) {
                    pool.backend().zero(raw[l]);
                }
            }
            rows = 0;
        }

        @Override
        public boolean pending() {
            return false;
        }

        @Override
        public long bytes() {
            long b = 0;
            for (int l = 0; l < scratch.length; l++) {
                for (Tensor t : scratch[l]) {
                    b += 4 * t.numel();
                }
                if (raw[l] != null) {
                    b += 4 * raw[l].numel();
                }
            }
            return b;
        }

        @Override
        public void free() {
            for (int l = 0; l < scratch.length; l++) {
                for (Tensor t : scratch[l]) {
                    pool.backend().free(t);
                }
                if (raw[l] != null) {
                    pool.backend().free(raw[l]);
                }
            }
        }
    }
}
