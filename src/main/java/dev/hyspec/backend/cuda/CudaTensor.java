package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import java.util.Arrays;
import jcuda.driver.CUdeviceptr;

/**
 * A tensor in device memory: float32 activations and state, or a weight in its checkpoint dtype.
 */
public final class CudaTensor implements Tensor {
    private final CUdeviceptr ptr;
    private final DType dtype;
    private final int[] shape;
    private boolean freed;

    CudaTensor(CUdeviceptr ptr, DType dtype, int[] shape) {
        this.ptr = ptr;
        this.dtype = dtype;
        this.shape = shape.clone();
    }

    @Override
    public int[] shape() {
        return shape.clone();
    }

    /** The device address; throws once the tensor was freed. */
    public CUdeviceptr ptr() {
        if (freed) {
            throw new IllegalStateException("tensor " + this + " was freed");
        }
        return ptr;
    }

    /** The address of element {@code index} (in this tensor's dtype). */
    public CUdeviceptr at(long index) {
        return ptr().withByteOffset(index * dtype.bytes());
    }

    CUdeviceptr ptrUnchecked() {
        return ptr;
    }

    public DType dtype() {
        return dtype;
    }

    boolean markFreed() {
        boolean was = freed;
        freed = true;
        return !was;
    }

    @Override
    public String toString() {
        return "cuda " + dtype + Arrays.toString(shape);
    }
}
