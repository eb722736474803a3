package dev.hyspec.backend.cuda;

import dev.hyspec.backend.SamplingRows;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/** Greedy and top-k / top-p / temperature sampling of logits rows ({@code sampling.cu}). */
final class SamplingKernels {
    /** Threads of one row's block ({@code SAMPLE_THREADS} in sampling.cu). */
    private static final int THREADS = 1024;
    /** Ints per row of the staged parameters: temperature, topP, uniform (doubles), topK, padding. */
    private static final int PARAM_INTS = 8;

    private final CudaRuntime rt;

    SamplingKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    int[] argmax(CudaTensor logits) {
        int rows = logits.rows();
        int vocab = logits.cols();
        if (rows == 0) {
            return new int[0];
        }
        if (vocab == 0) {
            throw new IllegalArgumentException("argmax: empty logits rows " + logits);
        }
        long outBytes = (long) rows * Integer.BYTES;
        CUdeviceptr out = rt.memory().alloc(outBytes);
        try {
            rt.launch("sampling_argmax", rows, 1, 1, THREADS, 0, logits, vocab, out);
            return picks(out, rows);
        } finally {
            rt.memory().release(out);
        }
    }

    int[] sample(CudaTensor logits, double[] temperature, int[] topK, double[] topP, double[] uniform) {
        int rows = logits.rows();
        int vocab = logits.cols();
        SamplingRows.check(rows, vocab, temperature, topK, topP, uniform);
        if (rows == 0) {
            return new int[0];
        }
        int[] packed = new int[rows * PARAM_INTS];
        boolean anySampled = false;
        for (int r = 0; r < rows; r++) {
            put(packed, r * PARAM_INTS, temperature[r]);
            put(packed, r * PARAM_INTS + 2, topP[r]);
            put(packed, r * PARAM_INTS + 4, uniform[r]);
            packed[r * PARAM_INTS + 6] = topK[r];
            anySampled |= !SamplingRows.params(r, temperature, topK, topP).isGreedy();
        }
        CUdeviceptr params = rt.stage(packed);
        long outBytes = (long) rows * Integer.BYTES;
        long scratchBytes = anySampled ? (long) rows * vocab * Float.BYTES : 0;
        CUdeviceptr out = rt.memory().alloc(outBytes);
        CUdeviceptr scratch = anySampled ? rt.memory().alloc(scratchBytes) : new CUdeviceptr();
        try {
            rt.launch("sampling_sample", rows, 1, 1, THREADS, 0, logits, vocab, params, scratch, out);
            return picks(out, rows);
        } finally {
            rt.memory().release(out);
            if (anySampled) {
                rt.memory().release(scratch);
            }
        }
    }

    /** A double as two ints, low word first (little-endian, as the kernel reads it). */
    private static void put(int[] packed, int at, double v) {
        long bits = Double.doubleToRawLongBits(v);
        packed[at] = (int) bits;
        packed[at + 1] = (int) (bits >>> 32);
    }

    private int[] picks(CUdeviceptr out, int rows) {
        int[] picks = new int[rows];
        rt.download(out, Pointer.to(picks), (long) rows * Integer.BYTES);
        for (int r = 0; r < rows; r++) {
            if (picks[r] < 0) {
                throw new IllegalArgumentException("logits row " + r
                        + " holds NaN or +inf, or only -inf: it cannot be sampled");
            }
        }
        return picks;
    }
}
