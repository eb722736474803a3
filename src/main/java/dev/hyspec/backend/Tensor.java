package dev.hyspec.backend;

/**
 * A handle to a tensor owned by a {@link Backend}: float32 activations and state, or a weight in
 * its checkpoint dtype. Row-major; the backend that made it is the only one that may read it.
 */
public interface Tensor {
    /** The shape, outermost dimension first. */
    int[] shape();

    default long numel() {
        long n = 1;
        for (int d : shape()) {
            n *= d;
        }
        return n;
    }

    /** Size of the outermost dimension. */
    default int rows() {
        return shape()[0];
    }

    /** Product of all dimensions but the outermost. */
    default int cols() {
        return (int) (numel() / rows());
    }
}
