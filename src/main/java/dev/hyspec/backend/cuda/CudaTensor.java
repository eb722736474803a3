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
    private final long numel;
    private boolean freed;

    CudaTensor(CUdeviceptr ptr, DType dtype, int[] shape) {
        this.ptr = ptr;
        this.dtype = dtype;
        this.shape = shape.clone();
        long n = 1;
        for (int d : shape) {
            n *= d;
        }
        this.numel = n;
    }

    @Override
    public int[] shape() {
        return shape.clone();
    }

    // numel, rows and cols without the copy shape() makes: the kernels' argument checks call them
    // for every launch of a recorded step
    @Override
    public long numel() {
        return numel;
    }

    @Override
    public int rows() {
        return shape[0];
    }

    @Override
    public int cols() {
        return (int) (numel / shape[0]);
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
