package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;

/**
 * The causal conv1d (prefill and the spec window), the Mamba2 scans, replay and replay outputs, and
 * the state layout conversion ({@code conv.cu}, {@code mamba2.cu}).
 */
final class Mamba2Kernels {
    private final CudaRuntime rt;

    Mamba2Kernels(CudaRuntime rt) {
        this.rt = rt;
    }

    void causalConv1d(CudaTensor x, CudaTensor window, CudaTensor w, CudaTensor bias, CudaTensor out, boolean advance) {
        throw new UnsupportedOperationException("causalConv1d");
    }

    void shiftWindow(CudaTensor window, CudaTensor x, int count) {
        throw new UnsupportedOperationException("shiftWindow");
    }

    void scan(CudaTensor state, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
              CudaTensor aLog, CudaTensor d, Mamba2Dims dims, CudaTensor y) {
        throw new UnsupportedOperationException("mamba2Scan");
    }

    void scanStates(CudaTensor state, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
                    CudaTensor aLog, CudaTensor d, Mamba2Dims dims, CudaTensor[] states, CudaTensor y) {
        throw new UnsupportedOperationException("mamba2ScanStates");
    }

    void replay(CudaTensor state, StateLayout layout, CudaTensor history, int count, Mamba2Dims dims) {
        throw new UnsupportedOperationException("mamba2Replay");
    }

    void replayOutputs(CudaTensor state, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
                       CudaTensor aLog, CudaTensor d, Mamba2Dims dims, CudaTensor history, CudaTensor y) {
        throw new UnsupportedOperationException("mamba2ReplayOutputs");
    }

    void transposeState(CudaTensor state, int heads, int rows, int cols) {
        throw new UnsupportedOperationException("transposeState");
    }
}
