package dev.hyspec.engine;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.backend.cuda.CudaRuntime;
import java.util.Optional;
import java.util.function.Supplier;
import org.jboss.logging.Logger;

/** Opens the backend that {@code hyspec.backend}, {@code hyspec.activation-dtype} and {@code hyspec.state-dtype} ask for. */
final class Backends {
    private static final Logger LOG = Logger.getLogger(Backends.class);

    private Backends() {}

    /**
     * {@code auto} takes CUDA when {@code cudaProbe} finds a usable device (and the built kernels),
     * else the CPU, and logs which and why; {@code cuda} without a device throws saying why.
     */
    static Backend open(String backend, String activationDtype, String stateDtype, Supplier<Optional<String>> cudaProbe) {
        String chosen = switch (backend) {
            case "cpu" -> "cpu";
            case "cuda" -> {
                Optional<String> missing = cudaProbe.get();
                if (missing.isPresent()) {
                    throw new IllegalStateException("hyspec.backend=cuda, but no CUDA device can be used: "
                            + missing.get() + ". Set hyspec.backend=cpu (or auto) to serve on the CPU.");
                }
                yield "cuda";
            }
            case "auto" -> {
                Optional<String> missing = cudaProbe.get();
                if (missing.isPresent()) {
                    LOG.infof("hyspec.backend=auto: serving on the CPU backend (%s)", missing.get());
                    yield "cpu";
                }
                LOG.info("hyspec.backend=auto: a CUDA device is present, serving on the cuda backend");
                yield "cuda";
            }
            default -> throw new IllegalArgumentException("hyspec.backend=" + backend
                    + " is not a backend; use auto, cpu or cuda");
        };
        if (!stateDtype.equals("float32")) {
            throw new IllegalArgumentException("hyspec.state-dtype=" + stateDtype + " is not available on the " + chosen
                    + " backend, which keeps float32 recurrent state; use float32");
        }
        if (chosen.equals("cpu")) {
            if (!activationDtype.equals("auto") && !activationDtype.equals("float32")) {
                throw new IllegalArgumentException("hyspec.activation-dtype=" + activationDtype
                        + " is not available on the cpu backend, which computes in float32; use auto or float32");
            }
            return new CpuBackend();
        }
        CudaBackend.Precision precision = switch (activationDtype) {
            case "auto", "bfloat16" -> CudaBackend.Precision.BF16;
            case "float32" -> CudaBackend.Precision.FLOAT32;
            default -> throw new IllegalArgumentException("hyspec.activation-dtype=" + activationDtype
                    + " is not an activation type; use auto, bfloat16 or float32");
        };
        CudaBackend cuda = new CudaBackend(precision);
        LOG.infof("cuda backend on %s, %s activations for matmuls, float32 state", cuda.deviceName(),
                precision == CudaBackend.Precision.BF16 ? "bfloat16" : "float32");
        return cuda;
    }

    static Backend open(String backend, String activationDtype, String stateDtype) {
        return open(backend, activationDtype, stateDtype, CudaRuntime::unavailableReason);
    }
}
