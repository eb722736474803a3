package dev.hyspec.backend.cuda;

import dev.hyspec.backend.ExpertWeights;
import dev.hyspec.backend.MoeRouting;
import dev.hyspec.checkpoint.DType;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * Sparse MoE of a decode or verify step without host round trips ({@code moe.cu}): routing on the
 * device, the routed experts' products over the {@code T·K} pairs, and the combine. Expert ids stay
 * on the device (as float values); every expert's weight address sits in a device table made once
 * at load ({@link #expertWeights}), so grids depend only on the shapes and a recorded step replays
 * whatever the routing ({@link StepGraphs}).
 */
final class MoeKernels {
    /** As {@code MM_ROWS} in moe.cu: output rows of one expert per block. */
    private static final int MM_ROWS = 16;
    private static final int MM_THREADS = 256;
    private static final int BLOCK = 256;
    /** Shared memory a kernel gets without opting in. */
    private static final int DEFAULT_SHARED = 48 << 10;

    /** An {@link ExpertWeights} with its device table of addresses ({@code const W*[E]}), alive until the runtime closes. */
    static final class Table extends ExpertWeights {
        private final CUdeviceptr table;
        private final DType dtype;

        private Table(CudaTensor[] weights, CUdeviceptr table) {
            super(weights);
            this.table = table;
            this.dtype = weights[0].dtype();
        }
    }

    private final CudaRuntime rt;

    MoeKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    /**
     * The experts' weights with a persistent device table of their addresses: allocated from the
     * accounted device memory and never released before the runtime closes (weights never move).
     */
    ExpertWeights expertWeights(CudaTensor[] weights) {
        DType dtype = weights[0].dtype();
        long[] addresses = new long[weights.length];
        for (int e = 0; e < weights.length; e++) {
            if (weights[e].dtype() != dtype) {
                throw new IllegalArgumentException("expert weights of mixed dtypes: " + weights[0] + " and " + weights[e]);
            }
            addresses[e] = StepGraphs.address(weights[e].ptr());
        }
        CUdeviceptr table = rt.memory().alloc(8L * weights.length);
        rt.upload(Pointer.to(addresses), table, 8L * weights.length);
        return new Table(weights, table);
    }

    /** Whether {@code experts} carries a device table of this backend. */
    static boolean hasTable(ExpertWeights experts) {
        return experts instanceof Table;
    }

    /** {@link MoeRouting#route} of every token: grid (T), one warp each. */
    void route(CudaTensor logits, MoeRouting routing, CudaTensor bias, CudaTensor ids, CudaTensor weights) {
        int tokens = logits.rows();
        int experts = logits.cols();
        int k = routing.topK();
        if (ids.rows() != tokens || ids.cols() != k || weights.numel() != ids.numel() || k > experts
                || (bias != null && bias.numel() != experts)
                || (routing.sigmoid() && experts % routing.nGroup() != 0)) {
            throw new IllegalArgumentException("moeRoute: logits " + logits + ", ids " + ids + ", weights " + weights
                    + ", bias " + bias + " for top-" + k + " in " + routing.nGroup() + " groups");
        }
        if (tokens == 0) {
            return;
        }
        int groups = routing.sigmoid() ? routing.nGroup() : 1;
        int shared = 4 * (3 * experts + 2 * groups);
        if (shared > DEFAULT_SHARED) {
            rt.allowSharedMemory("moe_route", shared);
        }
        rt.launch("moe_route", tokens, 1, 1, 32, shared, logits, bias == null ? logits : bias, bias == null ? 0 : 1,
                ids, weights, experts, k, routing.sigmoid() ? 1 : 0, routing.normTopkProb() ? 1 : 0, groups,
                routing.sigmoid() ? routing.topkGroup() : 1, routing.routedScalingFactor());
    }

    /** The routed products ({@code Backend.moeExpertMatmul}): grid (⌈N / 16⌉, E). */
    void expertMatmul(CudaTensor x, CudaTensor ids, ExpertWeights experts, CudaTensor out) {
        Table table = (Table) experts;
        int pairs = Math.toIntExact(ids.numel());
        int k = ids.cols();
        boolean perPair = x.rows() == pairs;
        int in = experts.cols();
        int n = experts.rows();
        if ((!perPair && x.rows() * k != pairs) || x.cols() != in || out.rows() != pairs || out.cols() != n) {
            throw new IllegalArgumentException("moeExpertMatmul: x " + x + ", ids " + ids + ", experts [" + n + ", "
                    + in + "], out " + out);
        }
        if (pairs == 0 || n == 0) {
            return;
        }
        String kernel = "moe_matmul_" + DenseKernels.suffix(table.dtype);
        int shared = 4 * pairs;
        if (shared > DEFAULT_SHARED) {
            rt.allowSharedMemory(kernel, shared);
        }
        rt.launch(kernel, DenseKernels.blocks(n, MM_ROWS), experts.numExperts(), 1, MM_THREADS, shared, x, ids,
                table.table, out, pairs, k, perPair ? 1 : 0, in, n);
    }

    /** {@code Backend.moeCombine}: grid (⌈D / 256⌉, T). */
    void combine(CudaTensor y, CudaTensor ids, CudaTensor weights, CudaTensor out) {
        int pairs = Math.toIntExact(ids.numel());
        int k = ids.cols();
        int tokens = out.rows();
        int d = out.cols();
        if (y.rows() != pairs || y.cols() != d || weights.numel() != pairs || tokens * k != pairs) {
            throw new IllegalArgumentException("moeCombine: y " + y + ", ids " + ids + ", weights " + weights
                    + ", out " + out);
        }
        if (tokens == 0 || d == 0) {
            return;
        }
        rt.launch("moe_combine", DenseKernels.blocks(d, BLOCK), tokens, 1, BLOCK, 0, y, ids, weights, out, k, d);
    }
}
