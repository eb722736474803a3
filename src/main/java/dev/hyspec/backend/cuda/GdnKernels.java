package dev.hyspec.backend.cuda;

import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.StateLayout;

/** The Gated DeltaNet scans, replay and replay outputs ({@code gdn.cu}). */
final class GdnKernels {
    private final CudaRuntime rt;

    GdnKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    void scan(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b, CudaTensor aLog,
              CudaTensor dtBias, GdnDims dims, CudaTensor out) {
        throw new UnsupportedOperationException("gatedDeltaScan");
    }

    void scanStates(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                    CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor[] states, CudaTensor out) {
        throw new UnsupportedOperationException("gatedDeltaScanStates");
    }

    void replay(CudaTensor state, StateLayout layout, CudaTensor history, int count, GdnDims dims) {
        throw new UnsupportedOperationException("gatedDeltaReplay");
    }

    void replayOutputs(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                       CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor history, CudaTensor out) {
        throw new UnsupportedOperationException("gatedDeltaReplayOutputs");
    }
}
