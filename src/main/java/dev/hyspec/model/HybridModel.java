package dev.hyspec.model;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.config.ModelConfig;
import dev.hyspec.model.config.ModelConfig.Block;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.model.config.BlockKind;
import dev.hyspec.model.layers.Attention;
import dev.hyspec.model.layers.Mixer;
import dev.hyspec.state.KvBlockPool;
import dev.hyspec.state.LayoutPolicy;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.RecurrentOps;
import dev.hyspec.state.RecurrentShape;
import dev.hyspec.state.StateStore;
import java.util.Arrays;
import java.util.function.IntUnaryOperator;
import java.util.List;

/**
 * A causal LM made of pre-norm residual blocks: {@code x ← x + mixer(rmsnorm(x))} for every block,
 * then a final RMSNorm and the LM head. One forward serves a batch of rows from many sequences —
 * prefill chunks, decodes and verifies with drafts — each continuing from its own state.
 */
public final class HybridModel {
    private final ModelConfig config;
    private final Backend backend;
    private final Tensor embedding;    // [V, D]
    private final Tensor lmHead;       // [V, D]
    private final Tensor finalNorm;    // [D]
    private final List<Tensor> norms;  // per block [D]
    private final List<Mixer> mixers;  // per block
    private final RecurrentOps[] recurrentOps;
    private final int[] kvWidths;
    private final long decodeWeightBytes;
    private IntUnaryOperator rowPadding;

    HybridModel(ModelConfig config, Backend backend, Tensor embedding, Tensor lmHead, Tensor finalNorm,
                List<Tensor> norms, List<Mixer> mixers, long decodeWeightBytes) {
        this.recurrentOps = mixers.stream().filter(m -> m instanceof RecurrentOps).map(m -> (RecurrentOps) m)
                .toArray(RecurrentOps[]::new);
        this.kvWidths = mixers.stream().filter(m -> m instanceof Attention).mapToInt(m -> ((Attention) m).kvWidth())
                .toArray();
        this.config = config;
        this.backend = backend;
        this.embedding = embedding;
        this.lmHead = lmHead;
        this.finalNorm = finalNorm;
        this.norms = norms;
        this.mixers = mixers;
        this.decodeWeightBytes = decodeWeightBytes;
        this.rowPadding = backend::paddedBatchSize;
    }

    /**
     * How many rows a decode/verify step of {@code R} rows is padded to (default: the backend's
     * {@link Backend#paddedBatchSize}); padding rows run on the state pool's padding slot.
     */
    public void setRowPadding(IntUnaryOperator rowPadding) {
        this.rowPadding = rowPadding;
    }

    /** Loads a checkpoint folder onto a backend (see {@link ModelLoader}). */
    public static HybridModel load(Checkpoint checkpoint, Backend backend) {
        return ModelLoader.load(checkpoint, backend);
    }

    /**
     * A model of {@code config} with random weights made on the backend ({@code seed} decides them;
     * see {@link GeneratedWeights}): for benchmarks of a model's shape without its checkpoint.
     */
    public static HybridModel generate(ModelConfig config, Backend backend, long seed) {
        return ModelLoader.generate(config, backend, seed);
    }

    /**
     * Bytes of weights one decode step reads: every matrix as stored (all experts of an MoE, so an
     * upper bound there) with the LM head, but not the embedding table, of which a step gathers only
     * its tokens' rows. Norms and per-head vectors are left out (kilobytes).
     */
    public long decodeWeightBytes() {
        return decodeWeightBytes;
    }

    public ModelConfig config() {
        return config;
    }

    public Backend backend() {
        return backend;
    }

    /** Every recurrent layer's shape, in pool-layer order. */
    public List<RecurrentShape> recurrentShapes() {
        return Arrays.stream(recurrentOps).map(RecurrentOps::shape).toList();
    }

    /** The recurrent layers' state operations, indexed by pool layer (for the rollback strategies). */
    public RecurrentOps[] recurrentOps() {
        return recurrentOps.clone();
    }

    /** {@code Hkv·D} of every attention layer, in KV-pool layer order. */
    public int[] kvWidths() {
        return kvWidths.clone();
    }

    /** The layout this model's recurrent kernels read natively: Gated DeltaNet {@code KV}, Mamba2 {@code VK}. */
    public StateLayout naturalLayout() {
        for (RecurrentOps ops : recurrentOps) {
            return ops.shape().kind() == BlockKind.GATED_DELTA_NET ? StateLayout.KV : StateLayout.VK;
        }
        return StateLayout.VK;
    }

    /** A state pool of {@code slots} slots and a KV pool of {@code pages} pages for this model. */
    public StateStore newStateStore(int slots, int pageSize, int pages, LayoutPolicy layouts) {
        return new StateStore(new MambaStatePool(backend, recurrentShapes(), slots, layouts.generate()),
                new KvBlockPool(backend, kvWidths, pageSize, pages), layouts);
    }

    /** A single sequence with its own small state store (tests, benchmarks, offline use). */
    public Sequence newSequence(int maxTokens) {
        return new Sequence(this, maxTokens);
    }

    /**
     * Runs one forward pass over a batch of rows and returns the logits {@code [R, V]} of the
     * positions the rows ask for, row after row ({@link BatchRow#logits}). Recurrent layers advance
     * prefill rows in place and run generate rows through their rollback strategy; the caller commits.
     * A step without prefill rows runs in uniform form ({@link ForwardBatch#uniform}), padded to the
     * backend's graph batch size, as one recorded graph step.
     */
    public Tensor forward(ForwardBatch batch, StateStore store) {
        // Decode and verify steps (no prefill row) run in uniform form, padded to the backend's graph
        // batch size, and may run as a captured graph on backends that have them.
        boolean graph = batch.rows().stream().noneMatch(r -> r.mode() == RowMode.PREFILL);
        if (graph && batch.tokensPerRow() == 0) {
            int padded = rowPadding.applyAsInt(batch.size());
            batch = ForwardBatch.uniform(batch.rows(), Math.max(padded, batch.size()), store.pool().paddingSlot());
        }
        if (store.pool().numLayers() > 0) {
            for (BatchRow row : batch.rows()) {
                store.pool().ensureLayout(row.slot(),
                        row.mode() == RowMode.PREFILL ? store.layouts().prefill() : store.layouts().generate());
            }
        }
        if (!graph) {
            return run(batch, store, batch.logitTokenRows());
        }
        // The recorded step runs the LM head over every token row, so its launches do not depend on
        // how many drafts each row carries; the rows that need logits are picked after it.
        Tensor all;
        backend.beginGraph();
        try {
            all = run(batch, store, null);
        } finally {
            backend.endGraph();
        }
        int[] logitTokens = batch.logitTokenRows();
        if (logitTokens.length == batch.totalTokens()) {
            return all;
        }
        Tensor logits = backend.zeros(logitTokens.length, config.vocabSize());
        if (logitTokens.length > 0) {
            backend.gatherRows(all, logitTokens, logits);
        }
        backend.free(all);
        return logits;
    }

    /**
     * Where a recorded step may be cut ({@link Backend#graphBreak}): after blocks 1, 5, 21, 85, …
     * (each piece four times the one before). The device runs a piece while the host records the next;
     * recording a block takes far less time than running it (about 5 against 110 µs at the 8B shape,
     * batch 1), so after the first piece, one block, the device seldom waits for the host.
     */
    static boolean breakAfter(int blocksDone) {
        long b = 1;
        while (b < blocksDone) {
            b = 4 * b + 1;
        }
        return b == blocksDone;
    }

    /** The forward pass; logits of the token rows {@code logitTokens} (every token row when null). */
    private Tensor run(ForwardBatch batch, StateStore store, int[] logitTokens) {
        int count = batch.totalTokens();
        int hidden = config.hiddenSize();
        float eps = config.normEps();
        boolean plusOne = config.normPlusOne();
        // embedding: x [N, D]
        Tensor x = backend.empty(count, hidden);
        backend.embedding(batch.tokens(), embedding, x);
        Tensor normed = backend.empty(count, hidden);
        // pre-norm, mixer, residual: each block's output is added to x together with the next norm
        Tensor y = null;   // the last block's output, not yet added to x
        for (Block b : config.blocks()) {
            Tensor w = norms.get(b.index());
            if (y == null) {
                backend.rmsNorm(x, w, hidden, eps, plusOne, normed);
            } else {
                backend.addRmsNorm(x, y, w, hidden, eps, plusOne, normed);
                backend.free(y);
            }
            y = mixers.get(b.index()).forward(normed, batch, store);
            if (breakAfter(b.index() + 1)) {
                backend.graphBreak();
            }
        }
        backend.free(normed);
        // final norm and LM head over the rows that need logits
        int logitRows = logitTokens == null ? count : logitTokens.length;
        Tensor logits = backend.empty(logitRows, config.vocabSize());
        if (logitRows == 0) {
            for (Tensor t : y == null ? new Tensor[] {x} : new Tensor[] {y, x}) {
                backend.free(t);
            }
            return logits;
        }
        Tensor lastNormed = backend.empty(logitRows, hidden);
        if (logitRows == count && y != null) {
            backend.addRmsNorm(x, y, finalNorm, hidden, eps, plusOne, lastNormed);
        } else {
            if (y != null) {
                backend.add(x, y, x);
            }
            Tensor last = x;
            if (logitRows != count) {
                last = backend.empty(logitRows, hidden);
                backend.gatherRows(x, logitTokens, last);
            }
            backend.rmsNorm(last, finalNorm, hidden, eps, plusOne, lastNormed);
            if (last != x) {
                backend.free(last);
            }
        }
        if (y != null) {
            backend.free(y);
        }
        backend.matmul(lastNormed, lmHead, null, logits);
        backend.free(lastNormed);
        backend.free(x);
        return logits;
    }
}
