package dev.hyspec.state;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import io.smallrye.common.annotation.Identifier;
import jakarta.enterprise.context.ApplicationScoped;

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
