package dev.hyspec.testing;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.backend.cuda.CudaBackend;

/**
 * The backend the model and engine tests run on: the CPU reference unless
 * {@code -Dhyspec.test.backend=cuda} (the GPU run, scripts/device/gpu-tests.sh) asks for the
 * GPU, in which case every test shares one {@link CudaBackend}, kept for the whole JVM.
 */
public final class TestBackends {
    private static CudaBackend cuda;

    private TestBackends() {}

    public static String selected() {
        return System.getProperty("hyspec.test.backend", "cpu");
    }

    /** A backend for a test: a fresh CPU backend, or the shared CUDA one. */
    public static synchronized Backend create() {
        if (!selected().equals("cuda")) {
            return new CpuBackend();
        }
        if (cuda == null) {
            cuda = new CudaBackend();
        }
        return cuda;
    }
}
