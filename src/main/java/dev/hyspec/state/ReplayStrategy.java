package dev.hyspec.state;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import io.smallrye.common.annotation.Identifier;
import jakarta.enterprise.context.ApplicationScoped;

/**
 * DESIGN §4 I4: the slot keeps {@code S_old = S(L − p)} and the previous step's per-token inputs;
 * a verify first replays those {@code p} tokens onto {@code S_old} in one update (writing
 * {@code S(L)} back), then computes the row's outputs straight from {@code S(L)} without writing any
 * per-token state, and stores this row's inputs in the other half of a double buffer. Commit only
 * records {@code p ← a}. The conv window follows the same rule: it is moved over the {@code p}
 * accepted inputs when the next step (or {@link #settle}) needs it.
 */
@ApplicationScoped
@Identifier(ReplayStrategy.ID)
public class ReplayStrategy implements RollbackStrategy {
    public static final String ID = "replay";

    @Override
    public String id() {
        return ID;
    }

    @Override
    public void verify(MambaStatePool pool, int slot, RecurrentOps ops, RecurrentRow row, Tensor y) {
        Backend backend = pool.backend();
        int l = ops.poolLayer();
        int tokens = row.tokens();
        Workspace ws = pool.workspace(slot, ID, () -> new Workspace(pool));
        // 1. replay: S_old → S(L), U(L − p) → U(L)
        catchUp(pool, slot, ops, ws);
        // 2. outputs from S(L); 3. this row's inputs into the other buffer
        int next = 1 - ws.current[l];
        Tensor history = ws.history(l, next, tokens);
        Tensor raw = ws.raw(l, next, tokens);
        backend.copyRows(row.raw(), 0, raw, 0, tokens);
        Tensor conv = backend.zeros(tokens, ops.shape().convDim());
        ops.convolve(row.raw(), pool.conv(l, slot), false, conv);
        ops.replayOutputs(pool.ssm(l, slot), pool.layout(slot), conv, row, history, y);
        backend.free(conv);
        ws.current[l] = next;
        ws.rows[l] = tokens;
    }

    /**
     * The verify of every row in one pass per operation: the conv windows catch up over each row's
     * {@code p} (one shift), this step's inputs go to the other buffers, and one fused launch replays
     * {@code S_old → S(L)} (written back) and computes the outputs from it.
     */
    @Override
    public void verifyBatch(MambaStatePool pool, int[] slots, RecurrentOps ops, RecurrentRow rows, int[] lengths,
                            int tokensPerRow, Tensor y) {
        Backend backend = pool.backend();
        int l = ops.poolLayer();
        int n = slots.length;
        Tensor[] states = new Tensor[n];
        Tensor[] windows = new Tensor[n];
        Tensor[] previous = new Tensor[n];
        Tensor[] previousRaw = new Tensor[n];
        Tensor[] next = new Tensor[n];
        Tensor[] nextRaw = new Tensor[n];
        int[] counts = new int[n];
        Workspace[] spaces = new Workspace[n];
        for (int r = 0; r < n; r++) {
            Workspace ws = pool.workspace(slots[r], ID, () -> new Workspace(pool));
            spaces[r] = ws;
            int cur = ws.current[l];
            states[r] = pool.ssm(l, slots[r]);
            windows[r] = pool.conv(l, slots[r]);
            next[r] = ws.history(l, 1 - cur, tokensPerRow);
            nextRaw[r] = ws.raw(l, 1 - cur, tokensPerRow);
            counts[r] = ws.pending[l];
            // with p > 0 the previous buffers hold the last verify's rows (at least p of them); with
            // p = 0 nothing is read from them, so they may be (re)allocated
            previous[r] = counts[r] > 0 ? ws.history[l][cur] : ws.history(l, cur, tokensPerRow);
            previousRaw[r] = counts[r] > 0 ? ws.raw[l][cur] : ws.raw(l, cur, tokensPerRow);
        }
        StateLayout layout = pool.layout(slots[0]);
        for (int slot : slots) {
            if (pool.layout(slot) != layout) {
                throw new IllegalStateException("a batched verify needs every slot in one layout");
            }
        }
        // 1. U(L − p) → U(L), 3. this step's pre-conv inputs into the other buffers, and the conv of
        // this step's tokens, in one operation
        Tensor conv = backend.empty(rows.tokens(), ops.shape().convDim());
        ops.convolveStepBatch(rows.raw(), windows, previousRaw, counts, nextRaw, tokensPerRow, conv);
        // 1 + 2. replay S_old → S(L) (written back), outputs from S(L), history into the other buffers
        ops.replayVerifyBatch(states, layout, previous, counts, conv, rows, next, tokensPerRow, y);
        backend.free(conv);
        for (int r = 0; r < n; r++) {
            Workspace ws = spaces[r];
            ws.pending[l] = 0;
            ws.current[l] = 1 - ws.current[l];
            ws.rows[l] = lengths[r];
        }
    }

    /** Applies the layer's pending {@code p} accepted tokens to its state and conv window. */
    private static void catchUp(MambaStatePool pool, int slot, RecurrentOps ops, Workspace ws) {
        int l = ops.poolLayer();
        int p = ws.pending[l];
        if (p > 0) {
            int cur = ws.current[l];
            ops.replay(pool.ssm(l, slot), pool.layout(slot), ws.history[l][cur], p);
            pool.backend().shiftWindow(pool.conv(l, slot), ws.raw[l][cur], p);
            ws.pending[l] = 0;
            ws.rows[l] = 0;
        }
    }

    @Override
    public void snapshot(MambaStatePool pool, int slot, RecurrentOps[] layers, int tokens, int target) {
        Backend backend = pool.backend();
        Workspace ws = pool.workspaceIfPresent(slot, ID);
        for (RecurrentOps ops : layers) {
            int l = ops.poolLayer();
            if (ws == null || ws.pending[l] != 0 || tokens < 1 || tokens > ws.rows[l]) {
                throw new IllegalStateException("slot " + slot + ": no verified row of " + tokens + " tokens to snapshot");
            }
            int cur = ws.current[l];
            backend.copy(pool.ssm(l, slot), pool.ssm(l, target));
            ops.replay(pool.ssm(l, target), pool.layout(slot), ws.history[l][cur], tokens);
            backend.copy(pool.conv(l, slot), pool.conv(l, target));
            backend.shiftWindow(pool.conv(l, target), ws.raw[l][cur], tokens);
        }
        pool.setLayout(target, pool.layout(slot));
    }

    @Override
    public void commit(MambaStatePool pool, int slot, RecurrentOps[] layers, int accepted) {
        Workspace ws = pool.workspaceIfPresent(slot, ID);
        for (RecurrentOps ops : layers) {
            int l = ops.poolLayer();
            if (ws == null || ws.pending[l] != 0 || accepted < 1 || accepted > ws.rows[l]) {
                throw new IllegalStateException("slot " + slot + ": cannot commit " + accepted + " tokens");
            }
        }
        java.util.Arrays.fill(ws.pending, accepted);
    }

    @Override
    public void copyCommitted(MambaStatePool pool, int slot, RecurrentOps[] layers, int target) {
        Backend backend = pool.backend();
        Workspace ws = pool.workspaceIfPresent(slot, ID);
        for (RecurrentOps ops : layers) {
            int l = ops.poolLayer();
            backend.copy(pool.ssm(l, slot), pool.ssm(l, target));
            backend.copy(pool.conv(l, slot), pool.conv(l, target));
            int p = ws == null ? 0 : ws.pending[l];
            if (p > 0) {
                int cur = ws.current[l];
                ops.replay(pool.ssm(l, target), pool.layout(slot), ws.history[l][cur], p);
                backend.shiftWindow(pool.conv(l, target), ws.raw[l][cur], p);
            }
        }
        pool.setLayout(target, pool.layout(slot));
    }

    @Override
    public void settle(MambaStatePool pool, int slot, RecurrentOps[] layers) {
        Workspace ws = pool.workspaceIfPresent(slot, ID);
        if (ws == null) {
            return;
        }
        for (RecurrentOps ops : layers) {
            catchUp(pool, slot, ops, ws);
        }
    }

    /**
     * Per layer: two buffers of replay history and pre-conv inputs ({@code current} is the one the
     * last verify wrote), {@code rows} the length of that row, and {@code pending} = p, the accepted
     * tokens of it not yet replayed (commit sets it for every layer; the layer's next verify or a
     * settle applies them).
     */
    static final class Workspace implements SlotWorkspace {
        private final MambaStatePool pool;
        final Tensor[][] history;
        final Tensor[][] raw;
        final int[] current;
        final int[] rows;
        final int[] pending;

        Workspace(MambaStatePool pool) {
            int n = pool.numLayers();
            this.pool = pool;
            this.history = new Tensor[n][2];
            this.raw = new Tensor[n][2];
            this.current = new int[n];
            this.rows = new int[n];
            this.pending = new int[n];
        }

        Tensor history(int layer, int buffer, int tokens) {
            return ensure(history[layer], buffer, tokens, pool.layers().get(layer).historyWidth());
        }

        Tensor raw(int layer, int buffer, int tokens) {
            return ensure(raw[layer], buffer, tokens, pool.layers().get(layer).convDim());
        }

        private Tensor ensure(Tensor[] pair, int buffer, int tokens, int width) {
            if (pair[buffer] == null || pair[buffer].rows() < tokens) {
                if (pair[buffer] != null) {
                    pool.backend().free(pair[buffer]);
                }
                pair[buffer] = pool.backend().zeros(tokens, width);
            }
            return pair[buffer];
        }

        @Override
        public void reset() {
            for (int l = 0; l < history.length; l++) {
                for (int b = 0; b < 2; b++) {
                    if (history[l][b] != null) {
                        pool.backend().zero(history[l][b]);
                    }
                    if (raw[l][b] != null) {
                        pool.backend().zero(raw[l][b]);
                    }
                }
            }
            java.util.Arrays.fill(current, 0);
            java.util.Arrays.fill(rows, 0);
            java.util.Arrays.fill(pending, 0);
        }

        @Override
        public boolean pending() {
            for (int p : pending) {
                if (p > 0) {
                    return true;
                }
            }
            return false;
        }

        @Override
        public long bytes() {
            long b = 0;
            for (int l = 0; l < history.length; l++) {
                for (int k = 0; k < 2; k++) {
                    b += history[l][k] == null ? 0 : 4 * history[l][k].numel();
                    b += raw[l][k] == null ? 0 : 4 * raw[l][k].numel();
                }
            }
            return b;
        }

        @Override
        public void free() {
            for (int l = 0; l < history.length; l++) {
                for (int k = 0; k < 2; k++) {
                    if (history[l][k] != null) {
                        pool.backend().free(history[l][k]);
                    }
                    if (raw[l][k] != null) {
                        pool.backend().free(raw[l][k]);
                    }
                }
            }
        }
    }
}
